"""What this machine brings: the Debian host tools each job needs (installed with apt).
Takes a job's tool group; gives the commands on PATH or one line saying what to install."""
