"""The results store: one JSON record per measurement, schema-versioned, written atomically.
Takes records from every stage; gives them back to the reports."""
