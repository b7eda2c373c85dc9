// Package faultproxy puts a TCP proxy that can misbehave on command between
// two parts of a test system (a server and PostgreSQL, a server and a
// worker): latency, a bandwidth limit, connection resets and a black hole
// (connections accepted and kept, nothing ever answered). It runs
// github.com/Shopify/toxiproxy/v2 in-process as a library: the proxy and
// its toxics are toxiproxy's; this package only starts it on a free port
// and names the faults the tests use.
package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
)

// Proxy forwards connections from Addr to an upstream address, through the
// faults currently set.
type Proxy struct {
	p *toxiproxy.Proxy

	mu    sync.Mutex
	names []string // toxics in force
	n     int
}

// New starts a proxy to upstream (host:port) on a free 127.0.0.1 port; it
// stops when the test ends.
func New(t testing.TB, upstream string) *Proxy {
	t.Helper()
	// toxiproxy's toxics log through zerolog's global logger, at trace
	// level: silence it (the servers under test are other processes).
	log.Logger = zerolog.Nop()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "p", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("faultproxy: start: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p}
}

// Addr is the proxy's listening address (host:port).
func (p *Proxy) Addr() string { return p.p.Listen }

// Port is the proxy's port.
func (p *Proxy) Port() string {
	_, port, _ := net.SplitHostPort(p.Addr())
	return port
}

// Direction selects the traffic a fault applies to.
type Direction string

// The directions: Upstream is from the client to the upstream server,
// Downstream from the server back to the client.
const (
	Upstream   Direction = "upstream"
	Downstream Direction = "downstream"
)

// Both is both directions.
var Both = []Direction{Upstream, Downstream}

func (p *Proxy) add(typ string, attrs map[string]any, dirs []Direction) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range dirs {
		p.n++
		name := fmt.Sprintf("%s-%s-%d", typ, d, p.n)
		body, _ := json.Marshal(map[string]any{"name": name, "type": typ, "stream": string(d), "toxicity": 1.0, "attributes": attrs})
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("faultproxy: add %s: %w", typ, err)
		}
		p.names = append(p.names, name)
	}
	return nil
}

// Latency delays every chunk of data by ms milliseconds in the given
// directions.
func (p *Proxy) Latency(ms int, dirs ...Direction) error {
	return p.add("latency", map[string]any{"latency": ms}, dirs)
}

// Bandwidth limits the given directions to kbps kilobytes per second.
func (p *Proxy) Bandwidth(kbps int, dirs ...Direction) error {
	return p.add("bandwidth", map[string]any{"rate": kbps}, dirs)
}

// Reset resets (TCP RST) every connection as soon as data flows in the
// given directions, until Heal.
func (p *Proxy) Reset(dirs ...Direction) error {
	return p.add("reset_peer", map[string]any{"timeout": 0}, dirs)
}

// BlackHole drops all data in the given directions and keeps the
// connections open: the peer never gets an answer, nor an error, until it
// gives up itself. New connections are accepted and treated the same.
func (p *Proxy) BlackHole(dirs ...Direction) error {
	return p.add("timeout", map[string]any{"timeout": 0}, dirs)
}

// Heal removes every fault. Connections whose data a black hole dropped
// stay broken (the peer waits for an answer that was lost); new ones work.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for _, name := range p.names {
		if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil && first == nil {
			first = fmt.Errorf("faultproxy: remove %s: %w", name, err)
		}
	}
	p.names = nil
	return first
}
