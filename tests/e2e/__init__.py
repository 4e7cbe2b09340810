"""The harness from outside, across every layer: the first hour, the wheel, fuzzing, the scope matrix, concurrency."""
