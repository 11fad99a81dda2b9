package a2atest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// The agents of the scenarios, and the dialog (A2A contextId) they share.
const (
	Assistant = handoff.AgentID("spiffe://a.example/assistant")
	Planner   = handoff.AgentID("spiffe://a.example/planner")
	Coder     = handoff.AgentID("spiffe://b.example/coder")
	Tester    = handoff.AgentID("spiffe://c.example/tester")
	Dialog    = "ctx-7c1e"
)

// Scenario is one scenario of the kit.
type Scenario struct {
	Name string
	Run  func(t *testing.T, l Line)
}

// Scenarios returns the scenarios every line passes, and those l has the
// feature for.
func Scenarios(l Line) []Scenario {
	s := []Scenario{
		{"Chain_HC29_HC46_HC66", chain},
		{"Refusals_NeverReachTheExecutor_HC30", refusals},
		{"HandofftestBadInputs_NeverReachTheExecutor_HC30", badInputs},
		{"Retransmission_NotRunAgain_HC38_HC39", retransmission},
		{"RetransmitOnTimeout_Backoff_HC37", backoff},
		{"Equivocation_HC53", equivocation},
		{"Equivocation_RejectFirst_HC54", rejectFirst},
		{"Equivocation_FinishFirst_HC54", finishFirst},
		{"StateChanges_HC29_HC44", stateChanges},
		{"TaskState_HC29", taskStates},
		{"FailedOutcome_HC44_HC45", failedOutcome},
		{"Cancel_SignedAndPropagated_HC28_HC66", cancelPropagated},
		{"Cancel_OnlyItsOwnHopsTask_HC28_HC55", cancelOwnTask},
		{"Cancel_RefusedFromAnotherSigner_HC55", cancelOtherSigner},
		{"Cancel_RequireSignedCancel", requireSignedCancel},
		{"Cancel_ExecutorReportsOutcome", cancelReportsOutcome},
		{"Cancel_LedgerKnowsNoEffect", cancelLedgerKnows},
		{"MissingInterceptor_TypedError_And_DeliveryOutcome", missingInterceptor},
		{"TraceContext_ParentIsTheDelegators", traceParent},
		{"TraceContext_DecidesNothing", traceDecidesNothing},
		{"TraceContext_BesideAnAttachedHandoff", traceBeside},
		{"Pause_Approve", pauseApprove},
		{"Pause_Deny", pauseDeny},
		{"Pause_NoAnswerUntilTimeout", pauseTimeout},
		{"Pause_RestartInBetween", pauseRestart},
		{"Pause_StateBoundToHop", pauseBound},
		{"Pause_SignedApproval", pauseSigned},
		{"Pause_FollowUpWithoutAnswer", pauseFollowUp},
		{"Pause_StrangersLeaveItPaused", pauseStrangers},
		{"Package_CarriedAndChecked", packageCarried},
		{"Pause_ResumedIsTheHop", pauseResumedIsTheHop},
		{"Refusals_CloseTheHop", refusalsCloseTheHop},
		{"Pause_PackageAcrossRestart", pausePackageAcrossRestart},
		{"Send_WithoutContextID", sendWithoutContext},
		{"Send_TransportError_StateOffered", sendTransportError},
		{"Pause_OneAnswerOneResume", pauseOneAnswerOneResume},
		{"Pause_AnswerBoundToTheCall", pauseAnswerBoundToTheCall},
		{"Replicas_OneExecutionPerMessage", replicasOneExecution},
		{"Ledger_SystemOfRecord", ledgerSystemOfRecord},
	}
	if l.PausesAuthRequired() {
		s = append(s, Scenario{"Pause_AuthRequiredAuthorizesNothing", pauseAuthRequired})
	}
	return s
}

// Run runs every scenario of l as a subtest.
func Run(t *testing.T, l Line) {
	for _, s := range Scenarios(l) {
		t.Run(s.Name, func(t *testing.T) { s.Run(t, l) })
	}
}

// Node is a delegate started for a scenario.
type Node struct {
	*Delegate
	URL   string
	Party *agenttest.Party
}

// Serve starts a delegate for p, with a Work of its own; opts change its
// configuration first.
func Serve(t *testing.T, l Line, p *agenttest.Party, opts ...func(*Delegate)) *Node {
	t.Helper()
	d := &Delegate{Agent: p.Agent, Work: &Work{}}
	for _, o := range opts {
		o(d)
	}
	return &Node{Delegate: d, URL: l.Serve(t, d), Party: p}
}

// Dial returns a delegator of p to n, authenticated as p.
func (n *Node) Dial(t *testing.T, l Line, p *agenttest.Party, o ...Dial) Delegator {
	t.Helper()
	var opt Dial
	if len(o) > 0 {
		opt = o[0]
	}
	if opt.From == "" && !opt.NoBearer {
		opt.From = p.ID
	}
	return l.Dial(t, p.Agent, n.URL, opt)
}

// Text is a message of the dialog.
func Text(s string) Msg { return Msg{Text: s, ContextID: Dialog} }

// StatusOf returns the status octets a result's message carries.
func StatusOf(t *testing.T, r *Result) []byte {
	t.Helper()
	require.NotNil(t, r)
	b, err := carry.Status(r.Meta)
	require.NoError(t, err)
	return b
}

// NoStatus checks that a result's message carries no status.
func NoStatus(t *testing.T, r *Result, msg string) {
	t.Helper()
	require.NotNil(t, r)
	_, err := carry.Status(r.Meta)
	require.ErrorIs(t, err, carry.ErrAbsent, msg)
}

func hopState(t *testing.T, a *handoff.Agent, hop handoff.HopID) handoff.HopInfo {
	t.Helper()
	info, ok, err := a.Hop(context.Background(), hop)
	require.NoError(t, err)
	require.True(t, ok, "hop %s unknown", hop)
	return info
}
