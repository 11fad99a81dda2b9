package replicas_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/state"
)

// The multi-process restart test. Three agents, origin -> middle -> leaf,
// each a process of its own on its own bbolt file (the delegate's memory
// and the delegator's records in one file). Every step runs in a fresh
// process, which does its step, reports, and is then killed with SIGKILL
// before it can close anything: each agent comes back only on what its
// store kept. Through the restarts the flow still retransmits the
// identical octets (HC-52), answers a retransmission with the last status
// (HC-39), keeps HC-42, cancels down the chain (HC-28) and resolves.

const restartRole = "HANDOFF_RESTART_STEP"

var restartIDs = map[string]handoff.AgentID{
	"origin": "spiffe://restart.example/origin",
	"middle": "spiffe://restart.example/middle",
	"leaf":   "spiffe://restart.example/leaf",
}

// restartKey derives a fixed P-256 key per agent, so that every process
// of an agent signs with the same key and trusts the same keys.
func restartKey(name string) *ecdsa.PrivateKey {
	seed := sha256.Sum256([]byte("handoff restart test key " + name))
	d := new(big.Int).SetBytes(seed[:])
	n := elliptic.P256().Params().N
	d.Mod(d, new(big.Int).Sub(n, big.NewInt(1)))
	d.Add(d, big.NewInt(1))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d.FillBytes(make([]byte, 32)))
	if err != nil {
		panic(err)
	}
	return k
}

// restartAgent opens an agent on its bbolt file in dir.
func restartAgent(dir, name string, now time.Time) (*handoff.Agent, func(), error) {
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	var signer *handoff.Signer
	for n, id := range restartIDs {
		format := handoff.JWS
		if n == "middle" {
			format = handoff.COSE // JWS and COSE hops mixed
		}
		s, err := handoff.NewSigner(restartKey(n), format, nil)
		if err != nil {
			return nil, nil, err
		}
		keys[id] = []handoff.TrustedKey{s.Key()}
		if n == name {
			signer = s
		}
	}
	trust, err := handoff.NewTrust(keys)
	if err != nil {
		return nil, nil, err
	}
	clock := func() time.Time { return now }
	store, err := boltstore.Open(filepath.Join(dir, name+".db"), boltstore.Options{Now: clock, ReclaimEvery: -1})
	if err != nil {
		return nil, nil, err
	}
	offers, err := store.Offers()
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	a, err := handoff.NewAgent(handoff.Config{ID: restartIDs[name], Signer: signer, Trust: trust,
		Store: store, Offers: offers, Now: clock})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return a, func() { store.Close() }, nil
}

// restartStep is what one process does. It reads files written by earlier
// steps in dir and writes what later steps need; its result goes to
// stdout as one JSON line.
func restartStep(dir, step string, now time.Time) (map[string]any, error) {
	ctx := context.Background()
	name, _, _ := strings.Cut(step, ":")
	a, _, err := restartAgent(dir, name, now) // never closed: the process is killed
	if err != nil {
		return nil, err
	}
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			panic(err)
		}
		return b
	}
	write := func(f string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			panic(err)
		}
	}
	out := map[string]any{}
	switch step {
	case "origin:offer":
		o, err := a.Offer(ctx, handoff.OfferParams{To: restartIDs["middle"], Dialog: "ctx-restart", Work: "refund-42", TTL: 2 * time.Minute})
		if err != nil {
			return nil, err
		}
		data, _ := o.Handoff.Encode(handoff.JSON)
		write("origin-offer", data)
		write("origin-hop", []byte(o.Offer.Hop))
	case "origin:retransmit":
		h, err := a.Retransmit(ctx, handoff.HopID(read("origin-hop")))
		if err != nil {
			return nil, err
		}
		data, _ := h.Encode(handoff.JSON)
		out["same"] = string(data) == string(read("origin-offer"))
		_, err = a.Offer(ctx, handoff.OfferParams{To: restartIDs["middle"], Dialog: "ctx-restart", Work: "refund-42"})
		out["hc42"] = fmt.Sprint(err)
	case "middle:receive":
		in, err := a.Receive(ctx, read("origin-offer"), handoff.Host{Dialog: "ctx-restart"})
		if err != nil {
			return nil, err
		}
		out["accepted"] = in.Accepted()
		if err := a.Take(ctx, in); err != nil {
			return nil, err
		}
		o, err := a.Offer(ctx, handoff.OfferParams{To: restartIDs["leaf"], From: in, Work: "refund-42/pay"})
		if err != nil {
			return nil, err
		}
		data, _ := o.Handoff.Encode(handoff.CBOR)
		write("middle-offer", data)
	case "middle:retransmitted":
		in, err := a.Receive(ctx, read("origin-offer"), handoff.Host{Dialog: "ctx-restart", Peer: restartIDs["origin"]})
		if err != nil {
			return nil, err
		}
		out["retransmission"] = in.Retransmission()
		out["owes_accepted"] = in.OwesAccepted()
	case "leaf:receive":
		in, err := a.Receive(ctx, read("middle-offer"), handoff.Host{Dialog: "ctx-restart"})
		if err != nil {
			return nil, err
		}
		out["accepted"] = in.Accepted()
		out["chain"] = string(in.Chain())
		st, err := a.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
		if err != nil {
			return nil, err
		}
		write("leaf-accepted", st.Octets)
	case "leaf:retransmitted":
		in, err := a.Receive(ctx, read("middle-offer"), handoff.Host{Dialog: "ctx-restart", Peer: restartIDs["middle"]})
		if err != nil {
			return nil, err
		}
		last, ok := in.LastStatus()
		out["retransmission"] = in.Retransmission()
		out["same_status"] = ok && string(last.Octets) == string(read("leaf-accepted"))
	case "middle:leaf-accepted":
		res, err := a.HandleStatus(ctx, read("leaf-accepted"))
		if err != nil {
			return nil, err
		}
		out["err"] = fmt.Sprint(res.Err())
		out["state"] = string(res.State)
	case "origin:cancel":
		n, err := a.Cancel(ctx, handoff.HopID(read("origin-hop")))
		if err != nil {
			return nil, err
		}
		write("origin-cancel", n.Status.Octets)
	case "middle:canceled":
		res, err := a.HandleStatus(ctx, read("origin-cancel"))
		if err != nil {
			return nil, err
		}
		out["err"] = fmt.Sprint(res.Err())
		out["state"] = string(res.State)
		out["notices"] = len(res.Notices)
		if len(res.Notices) == 1 {
			write("middle-cancel", res.Notices[0].Status.Octets)
		}
	case "leaf:canceled":
		res, err := a.HandleStatus(ctx, read("middle-cancel"))
		if err != nil {
			return nil, err
		}
		out["err"] = fmt.Sprint(res.Err())
		out["state"] = string(res.State)
		// The work had taken effect before the cancel arrived: the leaf
		// still reports it, from its store alone (HC-56).
		hop, _, _ := strings.Cut(string(read("middle-hop")), "\n")
		st, err := a.ReplyHop(ctx, restartIDs["middle"], handoff.HopID(hop), state.Completed,
			handoff.ReplyOptions{Effect: state.EffectFull})
		if err != nil {
			return nil, err
		}
		write("leaf-completed", st.Octets)
	case "middle:leaf-completed":
		res, err := a.HandleStatus(ctx, read("leaf-completed"))
		if err != nil {
			return nil, err
		}
		out["err"] = fmt.Sprint(res.Err())
		out["state"] = string(res.State)
		open, err := a.Unresolved(ctx)
		if err != nil {
			return nil, err
		}
		out["unresolved"] = len(open)
		st, err := a.ReplyHop(ctx, restartIDs["origin"], handoff.HopID(read("origin-hop")), state.Completed,
			handoff.ReplyOptions{Effect: state.EffectFull})
		if err != nil {
			return nil, err
		}
		write("middle-completed", st.Octets)
	case "origin:completed":
		res, err := a.HandleStatus(ctx, read("middle-completed"))
		if err != nil {
			return nil, err
		}
		out["err"] = fmt.Sprint(res.Err())
		out["state"] = string(res.State)
		hop, ok, err := a.Hop(ctx, handoff.HopID(read("origin-hop")))
		if err != nil || !ok {
			return nil, fmt.Errorf("hop: %v %v", ok, err)
		}
		out["resolved"] = hop.Resolved
		_, err = a.Offer(ctx, handoff.OfferParams{To: restartIDs["middle"], Dialog: "ctx-restart", Work: "refund-42"})
		out["new_offer"] = fmt.Sprint(err)
	default:
		return nil, fmt.Errorf("unknown step %q", step)
	}
	return out, nil
}

// TestMain runs one step of the restart test when the parent started this
// binary for it, and the tests otherwise.
func TestMain(m *testing.M) {
	if step := os.Getenv(restartRole); step != "" {
		restartChild(step)
		return
	}
	os.Exit(m.Run())
}

// restartChild does one step, reports it, and waits to be killed.
func restartChild(step string) {
	now, _ := time.Parse(time.RFC3339, os.Getenv("HANDOFF_RESTART_NOW"))
	out, err := restartStep(os.Getenv("HANDOFF_RESTART_DIR"), step, now)
	if err != nil {
		out = map[string]any{"error": err.Error()}
	}
	b, _ := json.Marshal(out)
	fmt.Printf("RESULT %s\n", b)
	os.Stdout.Sync()
	time.Sleep(time.Hour) // a running server: the parent kills it
}

func TestRestart_ThreeHopsKilledBetweenSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dozen processes")
	}
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	run := func(step string, advance time.Duration) map[string]any {
		t.Helper()
		now = now.Add(advance)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), restartRole+"="+step, "HANDOFF_RESTART_DIR="+dir,
			"HANDOFF_RESTART_NOW="+now.Format(time.RFC3339))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGKILL) // no Close, no flush: what the store kept is all there is
			_ = cmd.Wait()
		}()
		lines := bufio.NewScanner(stdout)
		done := make(chan map[string]any, 1)
		go func() {
			for lines.Scan() {
				if l, ok := strings.CutPrefix(lines.Text(), "RESULT "); ok {
					var m map[string]any
					_ = json.Unmarshal([]byte(l), &m)
					done <- m
					return
				}
			}
			done <- map[string]any{"error": "the process ended without a result"}
		}()
		select {
		case m := <-done:
			require.NotContains(t, m, "error", "%s: %v", step, m["error"])
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no result", step)
			return nil
		}
	}

	run("origin:offer", 0)
	m := run("origin:retransmit", 10*time.Second)
	assert.Equal(t, true, m["same"], "HC-52: the identical octets after a restart")
	assert.Contains(t, m["hc42"], "HC-42", "no new offer for the work while its hop is unresolved, across the restart")

	m = run("middle:receive", time.Second)
	assert.Equal(t, true, m["accepted"])
	// The middle's offer to the leaf names its hop; the leaf steps read it.
	h, _, err := handoff.ParseHandoff(mustRead(t, dir, "middle-offer"), handoff.Limits{})
	require.NoError(t, err)
	o, _, err := handoff.InspectUnverified(h.Offer, handoff.Limits{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "middle-hop"), []byte(o.Hop), 0o600))

	m = run("middle:retransmitted", time.Second)
	assert.Equal(t, true, m["retransmission"], "HC-38: not processed again after a restart")
	assert.Equal(t, true, m["owes_accepted"], "HC-39: taken, no status sent yet")

	m = run("leaf:receive", time.Second)
	assert.Equal(t, true, m["accepted"])
	assert.Equal(t, "full", m["chain"])
	m = run("leaf:retransmitted", time.Second)
	assert.Equal(t, true, m["retransmission"])
	assert.Equal(t, true, m["same_status"], "HC-39: the identical status octets after a restart")

	m = run("middle:leaf-accepted", time.Second)
	assert.Equal(t, "<nil>", m["err"])
	assert.Equal(t, "accepted", m["state"])

	run("origin:cancel", time.Second)
	m = run("middle:canceled", time.Second)
	assert.Equal(t, "<nil>", m["err"])
	assert.Equal(t, "canceled", m["state"])
	assert.Equal(t, float64(1), m["notices"], "HC-28: the cancel walks down, from the records of a restarted delegator")
	m = run("leaf:canceled", time.Second)
	assert.Equal(t, "<nil>", m["err"])
	assert.Equal(t, "canceled", m["state"])

	m = run("middle:leaf-completed", time.Second)
	assert.Equal(t, "<nil>", m["err"])
	assert.Equal(t, "completed", m["state"], "a late completed still resolves a canceled hop")
	assert.Equal(t, float64(0), m["unresolved"])
	m = run("origin:completed", time.Second)
	assert.Equal(t, "<nil>", m["err"])
	assert.Equal(t, "completed", m["state"])
	assert.Equal(t, true, m["resolved"])
	assert.Equal(t, "<nil>", m["new_offer"], "resolved: HC-42 lets a new offer for the work through")
}

func mustRead(t *testing.T, dir, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, f))
	require.NoError(t, err)
	return b
}
