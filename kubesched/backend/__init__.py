"""The scheduler's informer-fed state: informers, the cache, the scheduling queue, storage objects."""
