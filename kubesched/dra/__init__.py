"""Dynamic Resource Allocation: the DRA informers, the CEL environment and the structured allocator."""
