package redlock

// FenceKey is the key of the fence counter that tokens for key are drawn
// from: one counter per Redis Cluster hash slot, so keys that share a slot
// share it. Tools read it to show a key's counter (`GET` on each node).
func FenceKey(key string) string { return fenceKey(key) }
