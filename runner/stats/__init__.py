"""Pure statistics over plain numbers and arrays: agreement, intervals, tests, Dawid-Skene, votes."""
