"""Tests of the t2n command line (a package, so that its conftest does not take the
name ``conftest`` that other test folders import)."""
