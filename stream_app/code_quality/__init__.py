"""Code-quality metrics of seed 004: CodeBLEU, the test pass rate, and functional correctness,
which runs untrusted generated code in a kernel sandbox (the one part of the package that starts
processes)."""
