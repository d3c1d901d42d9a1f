package redlock

import (
	"strconv"
	"strings"
	"sync"
)

// Fence counters: one per Redis Cluster hash slot, so a node keeps at most
// 16384 of them however many lock keys come and go. The counter of a key has
// a hash tag that maps to the key's own slot, so key and counter live on the
// same shard when a node is itself a Redis Cluster, and one script can touch
// both. Keys that share a slot share a counter: tokens stay monotonic per key
// (a shared counter only moves faster), but two keys may see equal tokens.

const numSlots = 16384

// FenceKey is the key of the fence counter that tokens for key are drawn
// from: one counter per Redis Cluster hash slot, so keys that share a slot
// share it. Tools read it to show a key's counter (`GET` on each node).
func FenceKey(key string) string {
	return slotFenceKeys()[keySlot(key)]
}

var slotFenceKeys = sync.OnceValue(func() []string {
	keys := make([]string, numSlots)
	found := 0
	// Short tags, searched in order, until each slot has one: about 2ms once.
	for n := 0; found < numSlots; n++ {
		tag := strconv.FormatInt(int64(n), 36)
		s := crc16(tag) % numSlots
		if keys[s] == "" {
			keys[s] = "fencedlock:fence:{" + tag + "}"
			found++
		}
	}
	return keys
})

// keySlot is the Redis Cluster hash slot of key, honouring {hash tags}.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % numSlots
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster uses for key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// waitKeys are the keys of key's waiting set on a node (see
// scripts/waiting.lua): its order and its leases, in key's hash slot (the
// tag of its fence counter) so that one script can touch them with key.
func waitKeys(key string) (order, leases string) {
	tag := strings.TrimPrefix(FenceKey(key), "fencedlock:fence:")
	return "fencedlock:wait:" + tag + ":" + key, "fencedlock:lease:" + tag + ":" + key
}

// releasePrefix starts every release channel's name (waiting.lua spells
// it out too).
const releasePrefix = "fencedlock:released:"

// releaseChannel is the pub/sub channel on which a node tells the Client
// whose id is id that its waiter heads key's waiting set there and key was
// released (see waiting.lua's announce).
func releaseChannel(id, key string) string { return releasePrefix + id + ":" + key }
