package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

const (
	gwPlanner = "spiffe://a.example/agent/planner"
	gwCoder   = "spiffe://b.example/agent/coder"
)

// plainAgent is an A2A 1.0 agent that knows nothing of handoffs: it
// completes every message, and counts them.
type plainAgent struct{ calls atomic.Int32 }

func (p *plainAgent) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		p.calls.Add(1)
		if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
		}
	}
}

func (p *plainAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// servePlain serves a plainAgent on loopback: its card at the well-known
// path, JSON-RPC at /a2a.
func servePlain(t *testing.T) (string, *plainAgent) { return servePlainAt(t, "") }

// servePlainAt serves a plainAgent at addr, a free port when "".
func servePlainAt(t *testing.T, addr string) (string, *plainAgent) {
	t.Helper()
	p := &plainAgent{}
	srv := httptest.NewUnstartedServer(nil)
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the address the A2A guide names for the agent is taken")
		srv.Listener.Close()
		srv.Listener = ln
	}
	base := "http://" + srv.Listener.Addr().String()
	card := &a2a.AgentCard{Name: "plain", Description: "an A2A agent that knows nothing of handoffs", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "work", Name: "work", Description: "does the work", Tags: []string{"work"}}}}
	mux := http.NewServeMux()
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(p)))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return base, p
}

// gatewayWorld is a planner and a coder: their keys in dir, made by
// keygen, and a trust file binding both.
type gatewayWorld struct {
	dir     string
	trust   *handoff.Trust
	planner *handoff.Agent
}

func newGatewayWorld(t *testing.T) *gatewayWorld {
	t.Helper()
	dir := t.TempDir()
	var pubs []string
	for _, name := range []string{"planner", "coder"} {
		r := cli(t, nil, "keygen", "--out", filepath.Join(dir, name+".jwk"))
		mustCode(t, r, 0)
		pubs = append(pubs, strings.TrimSpace(r.stdout))
	}
	doc := fmt.Sprintf(`{%q:{"keys":[%s]},%q:{"keys":[%s]}}`, gwPlanner, pubs[0], gwCoder, pubs[1])
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trust.json"), []byte(doc), 0o644))
	trust, err := keyset.ParseTrust([]byte(doc))
	require.NoError(t, err)
	signer, _, err := loadSigner(filepath.Join(dir, "planner.jwk"), handoff.JWS)
	require.NoError(t, err)
	planner, err := handoff.NewAgent(handoff.Config{ID: gwPlanner, Signer: signer, Trust: trust})
	require.NoError(t, err)
	return &gatewayWorld{dir: dir, trust: trust, planner: planner}
}

func (w *gatewayWorld) file(name string) string { return filepath.Join(w.dir, name) }

// gatewayProcess is a running `handoff gateway`.
type gatewayProcess struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startGateway runs `handoff gateway args...` on a free loopback port and
// waits until it serves; it is killed at the end of the test.
func startGateway(t *testing.T, args ...string) *gatewayProcess {
	t.Helper()
	g := &gatewayProcess{cmd: exec.Command(binPath, append([]string{"gateway", "--listen", "127.0.0.1:0"}, args...)...),
		done: make(chan struct{})}
	stderr, err := g.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, g.cmd.Start())
	t.Cleanup(func() { g.kill(t) })
	found := make(chan string, 1)
	go func() {
		defer close(g.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			g.mu.Lock()
			g.logs.WriteString(sc.Text() + "\n")
			g.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case g.url = <-found:
	case <-g.done:
		t.Fatalf("the gateway exited:\n%s", g.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("the gateway did not start:\n%s", g.log())
	}
	return g
}

func (g *gatewayProcess) log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.String()
}

// kill ends the process with SIGKILL, as a crash does: nothing of it runs
// after, no store is closed.
func (g *gatewayProcess) kill(t *testing.T) {
	t.Helper()
	if g.cmd.ProcessState != nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	_ = g.cmd.Wait()
	<-g.done
	noCrash(t, g.log())
}

// sendHandoff sends a message carrying the Handoff of out to the A2A
// agent at base (its JSON-RPC path) and returns the signed status of the
// reply, if any.
func sendHandoff(t *testing.T, base string, out *handoff.Handoff, dialog string) []byte {
	t.Helper()
	data, err := out.Encode(handoff.JSON)
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(data, &h))
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("fix the pager"))
	m.ContextID, m.Metadata, m.Extensions = dialog, map[string]any{carry.ExtensionURI: h}, []string{carry.ExtensionURI}
	res := send(t, base, m)
	var meta map[string]any
	switch r := res.(type) {
	case *a2a.Message:
		meta = r.Metadata
	case *a2a.Task:
		if r.Status.Message != nil {
			meta = r.Status.Message.Metadata
		}
	}
	st, err := carry.Status(meta)
	if err != nil {
		return nil
	}
	return st
}

// send sends m with message/send to the agent at base's JSON-RPC path.
func send(t *testing.T, base string, m *a2a.Message) a2a.SendMessageResult {
	t.Helper()
	cl, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(base+"/jsonrpc", a2a.TransportProtocolJSONRPC)})
	require.NoError(t, err)
	defer cl.Destroy()
	ctx := a2aclient.AttachServiceParams(context.Background(), a2aclient.ServiceParams{a2a.SvcParamExtensions: {carry.ExtensionURI}})
	res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
	require.NoError(t, err)
	return res
}

// status verifies st as the coder's answer to out's offer and returns it.
func (w *gatewayWorld) status(t *testing.T, st []byte, out *handoff.Outgoing) *handoff.Status {
	t.Helper()
	s, err := handoff.ParseSigned(st, handoff.Limits{})
	require.NoError(t, err)
	v, err := handoff.VerifyStatus(s, out.Handoff.Offer, w.trust, handoff.Limits{})
	require.NoError(t, err)
	return v
}

// A gateway killed with SIGKILL and started again over the same bbolt
// file takes no hop twice: the offer it took before is answered with the
// identical last status and never reaches the upstream again (HC-34,
// HC-38). A new offer is taken as before. Over the memory store, what a
// restart lost is refused as "replay" (HC-59), and never reaches the
// upstream either.
//
// Redis and PostgreSQL run when their servers answer (HANDOFF_REDIS_ADDR,
// HANDOFF_POSTGRES_DSN, as .ci/redis.sh and .ci/postgres.sh start them),
// and are skipped otherwise, unless HANDOFF_REQUIRE_REDIS=1 or
// HANDOFF_REQUIRE_POSTGRES=1 (as .ci/run sets them), when they fail.
func TestGateway_Restart_NeverTakesAHopTwice(t *testing.T) {
	for _, store := range []string{"bolt", "memory", "redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			w := newGatewayWorld(t)
			up, plain := servePlain(t)
			spec := storeSpec(t, store, w)
			durable := store != "memory"
			args := []string{"--id", gwCoder, "--key", w.file("coder.jwk"), "--trust", w.file("trust.json"),
				"--upstream", up, "--store", spec, "--peer", gwPlanner}
			g := startGateway(t, args...)
			if store == "memory" {
				// Over memory, an offer issued before the gateway started
				// is a replay (HC-59): iat counts whole seconds.
				time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			}
			out, err := w.planner.Offer(context.Background(), handoff.OfferParams{To: gwCoder, Dialog: "ctx-restart"})
			require.NoError(t, err)
			first := sendHandoff(t, g.url, out.Handoff, "ctx-restart")
			assert.Equal(t, state.Completed, w.status(t, first, out).State)
			require.EqualValues(t, 1, plain.calls.Load())

			g.kill(t)
			g = startGateway(t, args...)
			again := sendHandoff(t, g.url, out.Handoff, "ctx-restart")
			assert.EqualValues(t, 1, plain.calls.Load(), "never forwarded again")
			if durable {
				assert.Equal(t, first, again, "the identical last status (HC-39)")
			} else {
				st := w.status(t, again, out)
				assert.Equal(t, state.Rejected, st.State)
				assert.Equal(t, reason.Replay, st.Reason, "what a restart lost is a replay (HC-59)")
			}
			if durable {
				next, err := w.planner.Offer(context.Background(), handoff.OfferParams{To: gwCoder, Dialog: "ctx-restart"})
				require.NoError(t, err)
				assert.Equal(t, state.Completed, w.status(t, sendHandoff(t, g.url, next.Handoff, "ctx-restart"), next).State)
				assert.EqualValues(t, 2, plain.calls.Load())
			}
		})
	}
}

// storeSpec returns the --store of a store kind, skipping the test when
// its server does not answer and it is not required.
func storeSpec(t *testing.T, kind string, w *gatewayWorld) string {
	t.Helper()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	missing := func(require, what string, err error) {
		if os.Getenv(require) == "1" {
			t.Fatalf("%s: %v (%s=1)", what, err, require)
		}
		t.Skipf("%s: %v", what, err)
	}
	switch kind {
	case "bolt":
		return w.file("coder-gateway.db")
	case "redis":
		addr := env("HANDOFF_REDIS_ADDR", "127.0.0.1:6399")
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			missing("HANDOFF_REQUIRE_REDIS", "no Redis server at "+addr+" (.ci/redis.sh starts one)", err)
		}
		c.Close()
		return "redis://" + addr + "/0"
	case "postgres":
		dsn := env("HANDOFF_POSTGRES_DSN", "postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable")
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
		}
		if err != nil {
			missing("HANDOFF_REQUIRE_POSTGRES", "no PostgreSQL server at "+dsn+" (.ci/postgres.sh starts one)", err)
		}
		return dsn
	}
	return "memory"
}

// Both sides as processes: an A2A client that knows nothing of handoffs
// sends through `handoff gateway --delegator` (the planner) to `handoff
// gateway` (the coder) in front of an agent that knows nothing of them
// either. The agent works once; the reply the client gets carries the
// coder's signed "completed" to the planner; the card the coder's gateway
// serves verifies with `handoff card verify`, and the planner's gateway
// requires it (--require-signed-card).
func TestGateway_BothSides(t *testing.T) {
	w := newGatewayWorld(t)
	up, plain := servePlain(t)
	coder := startGateway(t, "--id", gwCoder, "--key", w.file("coder.jwk"), "--trust", w.file("trust.json"),
		"--upstream", up, "--store", w.file("coder.db"), "--peer", gwPlanner)
	planner := startGateway(t, "--delegator", "--id", gwPlanner, "--key", w.file("planner.jwk"), "--trust", w.file("trust.json"),
		"--to", gwCoder, "--upstream", coder.url, "--store", w.file("planner.db"), "--require-signed-card")

	res := send(t, planner.url, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("fix the pager")))
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "%T", res)
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	assert.EqualValues(t, 1, plain.calls.Load())
	st, err := carry.Status(task.Status.Message.Metadata)
	require.NoError(t, err)
	s, err := handoff.ParseSigned(st, handoff.Limits{})
	require.NoError(t, err)
	v, err := handoff.OpenStatus(s, w.trust, handoff.Limits{})
	require.NoError(t, err)
	assert.Equal(t, state.Completed, v.State)
	assert.Equal(t, handoff.AgentID(gwCoder), v.Iss)
	assert.Equal(t, handoff.AgentID(gwPlanner), v.Aud)
	assert.Contains(t, planner.log(), `msg="handoff: status applied"`, "the planner's gateway verified and applied it")

	resp, err := http.Get(coder.url + "/.well-known/agent-card.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	card := w.file("card.json")
	f, err := os.Create(card)
	require.NoError(t, err)
	_, err = f.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r := cli(t, nil, "card", "verify", "--trust", w.file("trust.json"), "--agent", gwCoder, card)
	mustCode(t, r, 0)
}

// The flags the gateway refuses, before it starts anything.
func TestGateway_Usage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "a"}, "--id, --key and --upstream are required"},
		{[]string{"--id", "a", "--key", "k", "--upstream", "http://x"}, "--trust, --trust-url or --trust-doc-url is required"},
		{[]string{"--id", "a", "--key", "k", "--upstream", "http://x", "--trust", "t", "--delegator"}, "--delegator needs --to"},
		{[]string{"--id", "a", "--key", "k", "--upstream", "http://x", "--trust", "t", "--to", "b"}, "--to needs --delegator"},
		{[]string{"--id", "a", "--key", "k", "--upstream", "http://x", "--trust", "t", "--delegator", "--to", "b", "--optional"},
			"--optional is for the delegate's side"},
		{[]string{"--id", "a", "--key", "k", "--upstream", "http://x", "--trust", "t", "--peer", "p", "--peer-header", "H"},
			"--peer and --peer-header exclude each other"},
		{[]string{"--id", "a", "--key", "k", "--upstream", "http://x", "--trust", "t", "extra"}, "no arguments expected"},
	} {
		r := cli(t, nil, append([]string{"gateway"}, c.args...)...)
		mustCode(t, r, 2)
		assert.Contains(t, r.stderr, c.want)
		assert.Empty(t, r.stdout)
	}
}

// guideBlock returns the one ```sh block of the section under heading in
// the Markdown file at path.
func guideBlock(t *testing.T, path, heading string) string {
	t.Helper()
	md, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks []string
	in, inBlock := false, false
	var b strings.Builder
	for _, l := range strings.Split(string(md), "\n") {
		switch {
		case inBlock && l == "```":
			inBlock = false
			blocks = append(blocks, b.String())
			b.Reset()
		case inBlock:
			b.WriteString(l + "\n")
		case strings.HasPrefix(l, "#"):
			in = strings.TrimLeft(l, "# ") == heading
		case in && l == "```sh":
			inBlock = true
		}
	}
	require.Len(t, blocks, 1, "the section %q of %s shows one shell block", heading, path)
	return blocks[0]
}

// The A2A guide's section on the gateway, run as written with bash in an
// empty directory, the handoff binary on PATH, and an A2A agent that knows
// nothing of handoffs where the section says one listens. The agent works
// once; the card verifies; the reply carries the coder's signed
// "completed" to the planner.
func TestDocs_Gateway(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the guide's section uses curl: %v", err)
	}
	script := guideBlock(t, "../../docs/a2a.md", "An agent in any language: `handoff gateway`")
	_, plain := servePlainAt(t, "127.0.0.1:9700")
	dir := t.TempDir()
	// The harness's own lines: stop on the first failure, and stop the
	// gateways if the block did not get to.
	run := "set -eu\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", run)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	logs := func() string {
		a, _ := os.ReadFile(filepath.Join(dir, "coder-gateway.log"))
		b, _ := os.ReadFile(filepath.Join(dir, "planner-gateway.log"))
		return string(out) + "\n--- coder-gateway.log\n" + string(a) + "\n--- planner-gateway.log\n" + string(b)
	}
	require.NoError(t, err, logs())
	noCrash(t, logs())
	assert.EqualValues(t, 1, plain.calls.Load(), "the agent worked once")
	assert.Contains(t, string(out), `"verified": true`, "handoff card verify")

	i := strings.Index(string(out), `{"jsonrpc"`)
	require.GreaterOrEqual(t, i, 0, "no JSON-RPC reply:\n%s", out)
	var reply struct {
		Result struct {
			Task a2a.Task `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.NewDecoder(strings.NewReader(string(out[i:]))).Decode(&reply), "%s", out[i:])
	task := reply.Result.Task
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.NotNil(t, task.Status.Message)
	st, err := carry.Status(task.Status.Message.Metadata)
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(dir, "trust.json"))
	require.NoError(t, err)
	trust, err := keyset.ParseTrust(doc)
	require.NoError(t, err)
	s, err := handoff.ParseSigned(st, handoff.Limits{})
	require.NoError(t, err)
	v, err := handoff.OpenStatus(s, trust, handoff.Limits{})
	require.NoError(t, err)
	assert.Equal(t, state.Completed, v.State)
	assert.Equal(t, handoff.AgentID(gwCoder), v.Iss)
	assert.Equal(t, handoff.AgentID(gwPlanner), v.Aud)
}
