package doctor

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// info is the node's INFO (the default sections), field → value; err is
// set when INFO failed.
type info struct {
	fields map[string]string
	err    error
}

func readInfo(ctx context.Context, rdb *redis.Client) info {
	s, err := rdb.Info(ctx).Result()
	if err != nil {
		return info{err: err}
	}
	return info{fields: parseInfo(s)}
}

func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// server names the server and its version: "Redis 7.0.15", "Valkey 8.1.0".
func (in info) server() string {
	if v := in.fields["valkey_version"]; v != "" {
		return "Valkey " + v
	}
	if in.fields["server_name"] == "valkey" {
		return "Valkey " + in.fields["redis_version"]
	}
	return "Redis " + in.fields["redis_version"]
}

// config is what CONFIG GET returned for the parameters the checks read;
// errs holds the error of each parameter that could not be read (CONFIG
// renamed or denied, as on managed services).
type config struct {
	values map[string]string
	errs   map[string]error
}

// configParams are the parameters the checks read.
var configParams = []string{"appendonly", "appendfsync", "maxmemory", "maxmemory-policy", "hz"}

// readConfig reads each parameter with a CONFIG GET of its own, in one
// pipeline: servers before Redis 7 take one parameter per CONFIG GET.
func readConfig(ctx context.Context, rdb *redis.Client) config {
	c := config{values: make(map[string]string), errs: make(map[string]error)}
	cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range configParams {
			p.ConfigGet(ctx, name)
		}
		return nil
	})
	for i, name := range configParams {
		if i >= len(cmds) {
			c.errs[name] = ctx.Err()
			continue
		}
		m, err := cmds[i].(*redis.MapStringStringCmd).Result()
		v, ok := m[name]
		switch {
		case err != nil:
			c.errs[name] = err
		case !ok:
			c.errs[name] = errUnknownParam
		default:
			c.values[name] = v
		}
	}
	return c
}

// get returns a parameter's value, or ok false when it could not be read.
func (c config) get(name string) (string, bool) {
	v, ok := c.values[name]
	return v, ok
}

type configError string

func (e configError) Error() string { return string(e) }

const errUnknownParam = configError("the server does not know the parameter")
