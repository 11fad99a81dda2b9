package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentproto/handoff"
)

// The agents of the demo, in the order they are started.
const (
	roleAssistant = "assistant"
	rolePlanner   = "planner"
	roleCoder     = "coder"
	roleTester1   = "tester-1"
	roleTester2   = "tester-2"
)

func agentID(role string) handoff.AgentID {
	return handoff.AgentID("spiffe://demo.example/agent/" + role)
}

// shortName is an AgentID as the account prints it.
func shortName(id handoff.AgentID) string {
	return strings.TrimPrefix(string(id), "spiffe://demo.example/agent/")
}

// nodeConfig is what the driver writes for each agent in its directory.
type nodeConfig struct {
	Role   string          `json:"role"`
	ID     handoff.AgentID `json:"id"`
	Format string          `json:"format"` // "JWS" or "COSE"
	Listen string          `json:"listen"` // host:port, empty for the assistant
	// Token is what this agent presents when it calls another; Tokens maps
	// every token to its agent. They stand in for mutual TLS or OAuth.
	Token  string                     `json:"token"`
	Tokens map[string]handoff.AgentID `json:"tokens"`
	// Peers maps the roles this agent calls to their endpoints.
	Peers map[string]string `json:"peers"`
	// Work is how long the agent's own work takes.
	Work time.Duration `json:"work"`
	// Keys is the host:port where the agent publishes its JWK Set;
	// TrustURLs maps each peer to the URL where it publishes its own.
	Keys      string                     `json:"keys"`
	TrustURLs map[handoff.AgentID]string `json:"trust_urls"`
}

var plan = []struct {
	role   string
	format handoff.Format
	peers  []string
	work   time.Duration
}{
	{roleTester1, handoff.COSE, nil, 300 * time.Millisecond},
	// tester-2 is killed 200 ms into its work, long before it could end.
	{roleTester2, handoff.JWS, nil, 20 * time.Second},
	{roleCoder, handoff.JWS, []string{roleTester1, roleTester2}, 0},
	{rolePlanner, handoff.COSE, []string{roleCoder}, 0},
	{roleAssistant, handoff.JWS, []string{rolePlanner}, 0},
}

// setup writes under dir one directory per agent with its private key and
// config: where it publishes its public key, and where its peers publish
// theirs.
func setup(dir string) (map[string]*nodeConfig, error) {
	var ports portPicker
	defer ports.release()
	tokens := map[string]handoff.AgentID{}
	cfgs := map[string]*nodeConfig{}
	for _, p := range plan {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		d := filepath.Join(dir, p.role)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if err := writeKey(filepath.Join(d, "key.pem"), key); err != nil {
			return nil, err
		}
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return nil, err
		}
		c := &nodeConfig{Role: p.role, ID: agentID(p.role), Format: p.format.String(), Token: hex.EncodeToString(tok),
			Tokens: tokens, Peers: map[string]string{}, Work: p.work}
		tokens[c.Token] = c.ID
		if p.role != roleAssistant {
			if c.Listen, err = ports.pick(); err != nil {
				return nil, err
			}
		}
		if c.Keys, err = ports.pick(); err != nil {
			return nil, err
		}
		for _, peer := range p.peers {
			c.Peers[peer] = "http://" + cfgs[peer].Listen
		}
		cfgs[p.role] = c
	}
	for _, c := range cfgs {
		c.TrustURLs = map[handoff.AgentID]string{}
		for _, peer := range cfgs {
			if peer != c {
				c.TrustURLs[peer.ID] = keysURL(peer.Keys)
			}
		}
	}
	for _, c := range cfgs {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, c.Role, "config.json"), b, 0o600); err != nil {
			return nil, err
		}
	}
	return cfgs, nil
}

// portPicker hands out free loopback ports for the agents' processes to
// listen on. It holds every port it picked open until release, so that
// the system never hands the same port out twice while the ports are
// chosen (two agents on one port would fail to start).
type portPicker struct{ held []net.Listener }

func (p *portPicker) pick() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.held = append(p.held, l)
	return l.Addr().String(), nil
}

// release closes the ports picked, for the agents to listen on them.
func (p *portPicker) release() {
	for _, l := range p.held {
		l.Close()
	}
	p.held = nil
}

// node is one agent's process state.
type node struct {
	cfg    *nodeConfig
	dir    string
	agent  *handoff.Agent
	stores *stores
	signer *handoff.Signer
	keys   *keys
}

// openNode reads an agent's config and key, starts publishing its key and
// following its peers', and opens its stores. log hears when every peer's
// key is trusted, and of each later change.
func openNode(dir, role string, log *logger) (*node, error) {
	d := filepath.Join(dir, role)
	b, err := os.ReadFile(filepath.Join(d, "config.json"))
	if err != nil {
		return nil, err
	}
	var cfg nodeConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	k, err := readKey(filepath.Join(d, "key.pem"))
	if err != nil {
		return nil, err
	}
	format := handoff.JWS
	if cfg.Format == handoff.COSE.String() {
		format = handoff.COSE
	}
	sg, err := handoff.NewSigner(k, format, nil)
	if err != nil {
		return nil, err
	}
	ks, err := openKeys(&cfg, sg, d)
	if err != nil {
		return nil, err
	}
	st, err := openStores(d)
	if err != nil {
		ks.Close()
		return nil, err
	}
	// The key set source lists the peers' keys, not this agent's own.
	a, err := handoff.NewAgent(handoff.Config{ID: cfg.ID, Signer: sg, Trust: ks.src.Trust(), Store: st.Store, Offers: st.Offers,
		TrustLacksSigner: true})
	if err == nil {
		err = ks.start(a, peersOf(&cfg), log)
	}
	if err != nil {
		ks.Close()
		st.Close()
		return nil, err
	}
	go func() {
		select {
		case <-ks.ready:
			log.printf("%s", describeReady(&cfg))
		case <-ks.done:
		}
	}()
	return &node{cfg: &cfg, dir: d, agent: a, stores: st, signer: sg, keys: ks}, nil
}

func (n *node) Close() error {
	n.keys.Close()
	return n.stores.Close()
}
