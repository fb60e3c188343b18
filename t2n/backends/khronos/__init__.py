"""The Khronos NNEF target: standard operations only, static shapes; what it cannot
express is refused before anything is written."""
