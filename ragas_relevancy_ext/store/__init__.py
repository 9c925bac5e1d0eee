"""What is kept on disk between runs: the judge-reply cache."""
