"""Verification against the real thing: reference results compared with compiled CMSIS-NN (host first;
emulator and board runners follow)."""
