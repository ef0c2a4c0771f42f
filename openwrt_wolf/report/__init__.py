"""Reports drawn from the results store: the size report model and one renderer per format.
Takes records (or bin/ directories); gives terminal, markdown, json and csv tables."""
