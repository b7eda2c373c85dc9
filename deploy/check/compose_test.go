package check

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeFile loads deploy/compose.yaml with the compose
// specification's loader (which validates it against the specification's
// schema) and checks the cluster it describes: PostgreSQL with a health
// check, the migrations run once before the nodes, two nodes on that
// database with distinct published ports, and a stop grace longer than
// the nodes' --shutdown-grace.
func TestComposeFile(t *testing.T) {
	for _, password := range []string{"", "s3cret"} {
		env := []string{}
		if password != "" {
			env = append(env, "IWF_PG_PASSWORD="+password)
		}
		opts, err := cli.NewProjectOptions([]string{"../compose.yaml"}, cli.WithEnv(env), cli.WithWorkingDirectory(".."))
		if err != nil {
			t.Fatal(err)
		}
		p, err := cli.ProjectFromOptions(context.Background(), opts)
		if err != nil {
			t.Fatalf("load compose.yaml: %v", err)
		}
		if password == "" {
			password = "iwf"
		}
		checkCompose(t, p, password)
	}
}

func checkCompose(t *testing.T, p *types.Project, password string) {
	t.Helper()
	names := p.ServiceNames()
	slices.Sort(names)
	if !slices.Equal(names, []string{"migrate", "node-a", "node-b", "postgres"}) {
		t.Fatalf("services %v", names)
	}
	pg := p.Services["postgres"]
	if pg.HealthCheck == nil || len(pg.HealthCheck.Test) == 0 || !strings.Contains(strings.Join(pg.HealthCheck.Test, " "), "pg_isready") {
		t.Errorf("postgres health check %+v", pg.HealthCheck)
	}
	if got := env(pg, "POSTGRES_PASSWORD"); got != password {
		t.Errorf("POSTGRES_PASSWORD %q, want %q", got, password)
	}
	dbURL := func(s types.ServiceConfig) {
		t.Helper()
		u, err := url.Parse(env(s, "IWF_DB"))
		if err != nil || u.Scheme != "postgres" || u.Hostname() != "postgres" || u.Path != "/"+env(pg, "POSTGRES_DB") {
			t.Errorf("%s: IWF_DB %q is not the compose PostgreSQL", s.Name, env(s, "IWF_DB"))
			return
		}
		if pw, _ := u.User.Password(); u.User.Username() != env(pg, "POSTGRES_USER") || pw != password {
			t.Errorf("%s: IWF_DB credentials do not match the database's", s.Name)
		}
	}
	m := p.Services["migrate"]
	if !slices.Equal([]string(m.Command), []string{"migrate"}) {
		t.Errorf("migrate command %v", m.Command)
	}
	if d := m.DependsOn["postgres"]; d.Condition != types.ServiceConditionHealthy {
		t.Errorf("migrate waits for postgres %q, want healthy", d.Condition)
	}
	dbURL(m)
	published := map[string]bool{}
	for _, name := range []string{"node-a", "node-b"} {
		s := p.Services[name]
		dbURL(s)
		if !slices.Equal([]string(s.Command), []string{"serve"}) {
			t.Errorf("%s command %v", name, s.Command)
		}
		if d := s.DependsOn["migrate"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s waits for migrate %q, want completed successfully", name, d.Condition)
		}
		grace, err := time.ParseDuration(env(s, "IWF_SHUTDOWN_GRACE"))
		if err != nil {
			t.Fatalf("%s: IWF_SHUTDOWN_GRACE: %v", name, err)
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= grace {
			t.Errorf("%s: stop_grace_period %v, want more than IWF_SHUTDOWN_GRACE %s", name, s.StopGracePeriod, grace)
		}
		if len(s.Ports) != 1 || s.Ports[0].Target != 8801 || env(s, "IWF_ADDR") != ":8801" {
			t.Errorf("%s: ports %+v, IWF_ADDR %q", name, s.Ports, env(s, "IWF_ADDR"))
			continue
		}
		if published[s.Ports[0].Published] {
			t.Errorf("%s publishes port %s, taken by the other node", name, s.Ports[0].Published)
		}
		published[s.Ports[0].Published] = true
		if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: read_only %v, cap_drop %v", name, s.ReadOnly, s.CapDrop)
		}
	}
}

func env(s types.ServiceConfig, key string) string {
	if v := s.Environment[key]; v != nil {
		return *v
	}
	return ""
}
