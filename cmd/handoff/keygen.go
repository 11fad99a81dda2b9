package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentproto/handoff/keyset"
)

func runKeygen(e *env, args []string) int {
	fset := newFlagSet("keygen")
	alg := fset.String("alg", "ES256", "signature algorithm: ES256 (P-256), ES384 (P-384) or EdDSA (Ed25519)")
	out := fset.String("out", "", "file to write the PRIVATE JWK to, mode 0600 (required)")
	force := fset.Bool("force", false, "overwrite an existing --out file")
	usage := func() string {
		return usageText(fset, `Usage: handoff keygen [--alg ES256|ES384|EdDSA] --out KEY.jwk [--force]

Generates a signing key. The PRIVATE JWK goes to --out (mode 0600; an
existing file is kept unless --force); the PUBLIC JWK is printed on stdout,
with "alg" and "kid" set to the RFC 7638 thumbprint, ready to go in a trust
file under the agent's AgentId.`, `  handoff keygen --out planner.jwk > planner.pub.jwk
  handoff keygen --alg EdDSA --out coder.jwk > coder.pub.jwk
  # a trust file binding the public key to its agent:
  printf '{"spiffe://a.example/agent/planner":{"keys":[%s]}}\n' "$(cat planner.pub.jwk)" > trust.json`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usagef("keygen", "unexpected argument %q", pos[0])
	}
	if *out == "" {
		return e.usagef("keygen", "--out KEY.jwk is required")
	}
	key, err := generateKey(*alg)
	if err != nil {
		return e.usagef("keygen", "%v", err)
	}
	priv, tk, err := privateJWK(key)
	if err != nil {
		return e.failf("keygen", "%v", err)
	}
	pub, err := keyset.PublicJWK(tk)
	if err != nil {
		return e.failf("keygen", "%v", err)
	}
	if err := writePrivate(*out, indentJSON(priv), *force); err != nil {
		return e.failf("keygen", "%v", err)
	}
	if _, err := e.stdout.Write(append(pub, '\n')); err != nil {
		return e.failf("keygen", "%v", err)
	}
	return exitOK
}

func indentJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return append(b, '\n')
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// writePrivate writes a private key file readable by its owner only. It
// never replaces an existing file unless force; with force it replaces it
// atomically, so that a failure leaves the old key in place.
func writePrivate(path string, data []byte, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return errors.New(path + " exists; use --force to overwrite it")
		}
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			os.Remove(path)
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			os.Remove(path)
			return err
		}
		return f.Close()
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New(path + " is a directory")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".handoff-key-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}
