# The files here are third-party training code to be linted, not tests to run.
collect_ignore_glob = ["*.py"]
