package sentinel

import (
	"strings"
	"testing"
	"time"
)

func TestReplicaState(t *testing.T) {
	info := map[string]string{
		"role":   "master",
		"slave0": "ip=172.18.0.3,port=6379,state=online,offset=42,lag=0",
		"slave1": "ip=172.18.0.4,port=6379,state=wait_bgsave,offset=0,lag=0",
	}
	for _, tc := range []struct {
		name, host, port, want string
	}{
		{"online", "172.18.0.3", "6379", "online"},
		{"syncing", "172.18.0.4", "6379", "wait_bgsave"},
		{"other port", "172.18.0.3", "6380", ""},
		{"address prefix", "172.18.0.", "6379", ""},
		{"absent", "172.18.0.5", "6379", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplicaState(info, tc.host, tc.port); got != tc.want {
				t.Errorf("ReplicaState(%s:%s) = %q, want %q", tc.host, tc.port, got, tc.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	tm := TimingFor(4 * time.Second)
	conf := Config([]Monitor{
		{Name: "node0", Host: "127.0.0.1", Port: "7000"},
		{Name: "node1", Host: "172.18.0.2", Port: "6379", AuthUser: "sentinel"},
	}, tm)
	for _, line := range []string{
		"sentinel monitor node0 127.0.0.1 7000 1\n",
		"sentinel down-after-milliseconds node0 2000\n",
		"sentinel failover-timeout node0 8000\n",
		"sentinel monitor node1 172.18.0.2 6379 1\n",
		"sentinel auth-user node1 sentinel\n",
		"sentinel auth-pass node1 " + AnyPassword + "\n",
	} {
		if !strings.Contains(conf, line) {
			t.Errorf("config lacks %q:\n%s", line, conf)
		}
	}
	if strings.Contains(conf, "auth-user node0") {
		t.Errorf("node0 authenticates as its default user, but:\n%s", conf)
	}
}

// Below a TTL of 2s, Sentinel's down-after stays at four ping periods, and
// its failover timeout at three of its INFO seconds.
func TestTimingFloors(t *testing.T) {
	for _, tc := range []struct {
		ttl, downAfter, failoverTimeout time.Duration
	}{
		{300 * time.Millisecond, time.Second, 3 * time.Second},
		{time.Second, time.Second, 3 * time.Second},
		{4 * time.Second, 2 * time.Second, 8 * time.Second},
	} {
		t.Run(tc.ttl.String(), func(t *testing.T) {
			tm := TimingFor(tc.ttl)
			if tm.DownAfter != tc.downAfter || tm.FailoverTimeout != tc.failoverTimeout {
				t.Errorf("TimingFor(%v): down-after %v, failover timeout %v; want %v, %v", tc.ttl, tm.DownAfter, tm.FailoverTimeout, tc.downAfter, tc.failoverTimeout)
			}
			if 5*tm.Ping <= InfoDuringFailover {
				t.Errorf("five pings (%v) do not outlast Sentinel's INFO second", 5*tm.Ping)
			}
		})
	}
}
