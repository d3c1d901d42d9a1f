package contender

import (
	"strconv"
	"strings"
	"sync"
)

// fenceKey is fencedlock's fence counter key for a lock key — one counter
// per Redis Cluster hash slot, named by the shortest hash tag that maps to
// the slot — so that the raw floor touches the same keys. Computed once per
// session, outside the measured loop.
func fenceKey(key string) string { return slotFenceKeys()[keySlot(key)] }

const numSlots = 16384

var slotFenceKeys = sync.OnceValue(func() []string {
	keys := make([]string, numSlots)
	for n, found := 0, 0; found < numSlots; n++ {
		tag := strconv.FormatInt(int64(n), 36)
		if s := crc16(tag) % numSlots; keys[s] == "" {
			keys[s] = "fencedlock:fence:{" + tag + "}"
			found++
		}
	}
	return keys
})

func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % numSlots
}

// crc16 is CRC-16/XMODEM, Redis Cluster's key slot checksum.
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
