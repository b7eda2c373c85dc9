package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/faultproxy"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestBlackHoleIsUnavailable: when the database stops answering (a proxy
// that keeps the connections and forwards nothing), a statement with no
// deadline ends by itself as unavailable once the liveness probe gives up,
// later ones fail at once while the black hole lasts, and the store works
// again when the link heals.
func TestBlackHoleIsUnavailable(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := postgres.Open(openCtx, u.String(), postgres.WithLivenessTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Now(openCtx); err != nil {
		t.Fatal(err)
	}

	if err := proxy.BlackHole(faultproxy.Both...); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	errc := make(chan error, 1)
	go func() {
		_, err := st.Now(context.Background()) // no deadline of its own
		errc <- err
	}()
	select {
	case err := <-errc:
		if !engine.IsUnavailable(err) {
			t.Fatalf("a statement into the black hole ended with %v, want unavailable", err)
		}
		t.Logf("the statement into the black hole failed after %s", time.Since(began).Round(time.Millisecond))
	case <-time.After(time.Minute): // generous: the bound is 1 s plus a probe interval
		t.Fatal("a statement into the black hole still waits after a minute")
	}
	if down, _ := st.DatabaseDown(); !down {
		t.Error("DatabaseDown() = false during the black hole")
	}
	quick := time.Now()
	if _, err := st.Now(context.Background()); !engine.IsUnavailable(err) {
		t.Fatalf("during the black hole: %v, want unavailable", err)
	}
	if took := time.Since(quick); took > 10*time.Second {
		t.Errorf("a statement during the black hole took %s to fail, want at once", took)
	}

	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := st.Now(c)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover within a minute of the heal: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the probe reconnects within its interval
	}
	if down, _ := st.DatabaseDown(); down {
		t.Error("DatabaseDown() = true after the store answered again")
	}
}
