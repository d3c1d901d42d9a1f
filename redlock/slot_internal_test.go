package redlock

import "testing"

func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot uint16
	}{
		{"123456789", 0x31C3 % numSlots}, // the CRC-16/XMODEM check value
		{"foo", 12182},                   // CLUSTER KEYSLOT foo
		{"{user1000}.following", keySlot("user1000")},
		{"foo{}{bar}", keySlot("foo{}{bar}")}, // empty tag: whole key
		{"foo{{bar}}zap", keySlot("{bar")},
	} {
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

func TestFenceKeySharesSlotAndIsBounded(t *testing.T) {
	seen := map[string]bool{}
	for i := range 50000 {
		key := "lock:" + string(rune('a'+i%26)) + itoa(i)
		fk := FenceKey(key)
		if keySlot(fk) != keySlot(key) {
			t.Fatalf("fence key %q (slot %d) not in slot of %q (%d)", fk, keySlot(fk), key, keySlot(key))
		}
		seen[fk] = true
	}
	if len(seen) > numSlots {
		t.Fatalf("%d fence keys for 50000 lock keys, want <= %d", len(seen), numSlots)
	}
	if len(slotFenceKeys()) != numSlots {
		t.Fatalf("slot table has %d entries", len(slotFenceKeys()))
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
