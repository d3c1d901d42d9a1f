package redlock

import (
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestKeySlot(t *testing.T) {
	// Slots as a Redis server reports them (CLUSTER KEYSLOT, Redis 7.0).
	for _, tc := range []struct {
		key  string
		slot uint16
	}{
		{"123456789", 12739}, // 0x31C3, the CRC-16/XMODEM check value, mod 16384
		{"foo", 12182},
		{"{user1000}.following", 3443}, // the slot of "user1000"
		{"foo{}{bar}", 8363},           // empty tag: the whole key, not "bar" (5061)
		{"foo{}", 5542},
		{"{}", 15257},
		{"foo{{bar}}zap", 4015}, // the slot of "{bar"
		{"foo{bar}{zap}", 5061}, // the first tag only: "bar"
	} {
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

// TestKeySlotAgreesWithRedis compares keySlot with the slot a real server
// computes, for keys with every kind of brace and byte, and checks that each
// key's fence counter lands in the same slot by the server's reckoning.
func TestKeySlotAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes"))
	rdb := redistest.Client(t, srv)
	keys := []string{
		"", "foo", "{", "}", "{}", "}{", "{{}}", "{}{}", "foo{", "foo}", "foo{}", "{}foo", "foo{}{bar}",
		"foo{{bar}}zap", "foo{bar}{zap}", "foo{bar}}", "{{bar}", "{bar}}", "a{b}c{d}", "{user1000}.following",
		"{user1000}.followers", "x{ }y", "x{\x00}y", "\x00\xff{\xfe}", "\xff\xff\xff",
		"schlüssel{ä}", "日本{語}", "🔒{🔑}", "{🔑}", "Ω", "orders:{42}:lock", strings100k(),
	}
	rng := rand.New(rand.NewPCG(9, 9))
	alphabet := []byte("ab{}{}\x00\xffé:")
	for range 300 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	ctx := t.Context()
	cmds := make([]*redis.IntCmd, 0, 2*len(keys))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			cmds = append(cmds, p.ClusterKeySlot(ctx, k), p.ClusterKeySlot(ctx, FenceKey(k)))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		want, fence := cmds[2*i].Val(), cmds[2*i+1].Val()
		if got := keySlot(k); int64(got) != want {
			t.Errorf("keySlot(%q) = %d, server says %d", k, got, want)
		}
		if fence != want {
			t.Errorf("FenceKey(%q) = %q is in slot %d, the key in %d", k, FenceKey(k), fence, want)
		}
	}
}

func strings100k() string {
	b := make([]byte, 100_000)
	for i := range b {
		b[i] = "{}x"[i%3]
	}
	return string(b)
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
