package netfault

import (
	"fmt"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// NewServer returns the toxiproxy server the proxies hang off. Its HTTP
// API is never started: proxies are driven in process. Metrics and logging
// are off.
func NewServer() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
}

// StartProxy listens on a free loopback port and forwards to upstream
// through a gate in each direction, both driven by st.
func StartProxy(server *toxiproxy.ApiServer, name, upstream string, st *State) (*toxiproxy.Proxy, error) {
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	// The gates go in before Start: no link exists yet, so setting their
	// fields here happens before any link goroutine reads them.
	for _, dir := range []string{"upstream", "downstream"} {
		spec := fmt.Sprintf(`{"name":"gate_%s","type":%q,"stream":%q}`, dir, gateType, dir)
		w, err := p.Toxics.AddToxicJson(strings.NewReader(spec))
		if err != nil {
			return nil, fmt.Errorf("netfault: proxy %s: add %s gate: %w", name, dir, err)
		}
		g, ok := w.Toxic.(*gate)
		if !ok {
			return nil, fmt.Errorf("netfault: proxy %s: toxic %q is a %T, not the gate", name, gateType, w.Toxic)
		}
		g.st, g.upstream = st, dir == "upstream"
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("netfault: proxy %s: start: %w", name, err)
	}
	return p, nil
}

// StopProxy releases the gates' held data, then closes the listener and
// every connection; the links' goroutines end as their connections fail.
func StopProxy(p *toxiproxy.Proxy, st *State) {
	st.Close()
	p.Stop()
}
