package evidence

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
)

func testBinding(t *testing.T) Binding {
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	return Binding{Hop: hop, Iss: triage, Aud: payments, Iat: t0, Exp: t0 + 120}
}

func TestBuild_BindsToOffer(t *testing.T) {
	bind := testBinding(t)
	built, err := NewBuilder(refundPackage()).Build(bind, BuildOptions{Time: time.Unix(t0+5, 0)})
	require.NoError(t, err)
	p := built.Package
	require.Equal(t, string(bind.Hop), p.Handoff.ID)
	require.Equal(t, string(triage), p.Sender.Agent)
	require.Equal(t, string(payments), p.Receiver.Agent)
	require.Equal(t, time.Unix(t0+5, 0).UTC(), p.Handoff.Time)
	require.Equal(t, Kind, built.Ref.Kind)
	d, err := Digest(built.Encoded, DecodeOptions{})
	require.NoError(t, err)
	require.True(t, d.Equal(built.Ref.Dig))
}

func TestBuild_RefusesTimeOutsideWindowAndBadBinding(t *testing.T) {
	bind := testBinding(t)
	for _, at := range []int64{t0 - 1, t0 + 121} {
		_, err := NewBuilder(refundPackage()).Build(bind, BuildOptions{Time: time.Unix(at, 0)})
		require.ErrorIs(t, err, ErrUnbound)
	}
	bad := bind
	bad.Hop = "short"
	_, err := NewBuilder(refundPackage()).Build(bad, BuildOptions{})
	require.ErrorIs(t, err, ErrUnbound)
	bad = bind
	bad.Exp = bad.Iat
	_, err = NewBuilder(refundPackage()).Build(bad, BuildOptions{})
	require.ErrorIs(t, err, ErrUnbound)
}

// HC-62: each credential shape is refused, wherever it sits, and the error
// names the pattern and the path, never the value.
func TestBuild_HC62_RefusesCredentialLikeStrings(t *testing.T) {
	cases := []struct {
		pattern Pattern
		value   string
	}{
		{PatternPEMPrivateKey, "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"},
		{PatternPEMPrivateKey, "-----BEGIN RSA PRIVATE KEY-----"},
		{PatternPEMPrivateKey, "-----BEGIN OPENSSH PRIVATE KEY-----"},
		{PatternJWT, "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
		{PatternBearer, "Authorization: Bearer 0123456789abcdefghijKLMNOP"},
		{PatternBearer, "basic dXNlcjpwYXNzd29yZDEyMzQ1Ng=="},
		{PatternAWSAccessKey, "AKIAIOSFODNN7EXAMPLE"},
		{PatternAWSSecret, "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{PatternGCPAPIKey, "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234"},
		{PatternAzureKey, "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + repeat("A", 86) + "=="},
		{PatternAzureKey, "https://x.blob.core.windows.net/c?sv=2020&sig=" + repeat("a", 43)},
		{PatternGitHubToken, "ghp_" + repeat("a", 36)},
		{PatternGitHubToken, "github_pat_" + repeat("B", 30)},
		{PatternSlackToken, "xoxb-123456789012-abcdefghij"},
		{PatternSlackToken, "https://hooks.slack.com/services/T000/B000/XXXXXXXX"},
		{PatternStripeKey, "sk_live_" + repeat("a", 24)},
		{PatternStripeKey, "whsec_" + repeat("z", 24)},
		{PatternPasswordField, "login with password: hunter2"},
		{PatternURLCredentials, "postgres://ops:s3cret@db.internal/ledger"},
	}
	for _, c := range cases {
		t.Run(string(c.pattern), func(t *testing.T) {
			p := refundPackage()
			p.Assumptions = append(p.Assumptions, Assumption{Item: c.value, Validation: "none"})
			_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
			require.ErrorIs(t, err, ErrRestricted)
			var re *RestrictedError
			require.True(t, errors.As(err, &re))
			require.Contains(t, re.Hits, Hit{Pattern: c.pattern, Path: "/assumptions/1/item"})
			require.NotContains(t, err.Error(), c.value)
		})
	}
}

// The password-field rule looks at member names too, and at passed
// context items named like a credential.
func TestBuild_HC62_PasswordFields(t *testing.T) {
	p := refundPackage()
	p.Extra = Extra{"x-login": []byte(`{"user":"ops","api-key":"k-123"}`)}
	_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
	var re *RestrictedError
	require.True(t, errors.As(err, &re))
	require.Contains(t, re.Hits, Hit{PatternPasswordField, "/x-login/api-key"})

	p = refundPackage()
	p.Passed = append(p.Passed, ContextItem{Name: "client_secret", Value: "abc"})
	_, err = NewBuilder(p).Build(testBinding(t), BuildOptions{})
	require.True(t, errors.As(err, &re))
	require.Contains(t, re.Hits, Hit{PatternPasswordField, "/context_passed/2/value"})

	// An empty password member says nothing secret.
	p = refundPackage()
	p.Extra = Extra{"x-login": []byte(`{"password":""}`)}
	_, err = NewBuilder(p).Build(testBinding(t), BuildOptions{})
	require.NoError(t, err)
}

// HC-62: the value of a withheld item never rides in the package.
func TestBuild_HC62_RefusesWithheldValue(t *testing.T) {
	p := refundPackage()
	p.Attempts = append(p.Attempts, Attempt{Attempt: "charge back to card 4111111111111111", Result: "not tried"})
	_, err := NewBuilder(p).Withhold("card_number", "PCI", []byte("4111111111111111")).Build(testBinding(t), BuildOptions{})
	var re *RestrictedError
	require.True(t, errors.As(err, &re))
	require.Equal(t, []Hit{{PatternWithheldValue, "/attempts/1/attempt"}}, re.Hits)
	require.NotContains(t, err.Error(), "4111111111111111")

	// Withheld: the item and its reason travel, the value does not.
	built, err := NewBuilder(refundPackage()).Withhold("card_number", "PCI", []byte("4111111111111111")).Build(testBinding(t), BuildOptions{})
	require.NoError(t, err)
	require.Equal(t, []Withheld{{Item: "card_number", Reason: "PCI"}}, built.Package.Withheld)
	require.NotContains(t, string(built.Encoded), "4111111111111111")

	_, err = NewBuilder(refundPackage()).Withhold("pin", "PCI", []byte("123")).Build(testBinding(t), BuildOptions{})
	require.ErrorIs(t, err, ErrMalformed)
}

// Ordinary business text is not taken for a credential.
func TestBuild_NoFalsePositivesOnCleanPackage(t *testing.T) {
	hits, err := scan(mustEncode(t, refundPackage()), nil, nil)
	require.NoError(t, err)
	require.Empty(t, hits)
}

func mustEncode(t *testing.T, p Package) []byte {
	b, err := p.Encode()
	require.NoError(t, err)
	return b
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
