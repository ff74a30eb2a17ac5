"""The scheduling framework: extension points, cycle state, statuses and node/pod views."""
