package evidence

// template is the annotated empty package: every member of the contract's
// template, each value a description of what goes there in angle brackets.
// It is JSON; times are RFC 3339. A description that starts "required" is
// of a field Build and Check refuse a package without (in each entry, for
// a list's entries); "at least one" marks a list that needs an entry.
// Other lists may be empty, other fields left out.
const template = `{
  "handoff": {
    "id": "<required, set by Build: HopId of the offer this package rides with>",
    "time": "<required, set by Build: RFC 3339 time inside the offer's [iat, exp]>"
  },
  "sender": {"role": "<required: ROLE of the sending owner>", "agent": "<required, set by Build: AgentId: the offer's iss>"},
  "receiver": {"role": "<required: ROLE of the receiving owner>", "agent": "<required, set by Build: AgentId: the offer's aud>"},
  "control": "<required: transfer-ownership | specialist-returns-result>",
  "outcome": {"result": "<required: RESULT wanted>", "done_when": "<required: ACCEPTANCE condition>"},
  "authority": {
    "allowed": ["<required, at least one: ACTION the receiver may take>"],
    "must_ask": ["<ACTION that needs an approval first: a pending approval with an owner for it is required>"],
    "denied": ["<ACTION the receiver may never take>"]
  },
  "state": [
    {"system": "<required, at least one state: SYSTEM OF RECORD>", "state": "<required: STATE it holds>",
     "as_of": "<required: RFC 3339 time observed>", "evidence": ["<artifact id>"]}
  ],
  "completed": [
    {"action": "<required: ACTION taken>", "external": true,
     "operation_id": "<OPERATION ID: this or the idempotency key is required when external>",
     "idempotency_key": "<IDEMPOTENCY KEY: this or the operation id is required when external>",
     "hop": "<handoff digest of the earlier hop of the chain it was performed under; absent: this hop>",
     "postcondition": "<required: POSTCONDITION that holds>", "evidence": ["<artifact id>"]}
  ],
  "artifacts": [
    {"id": "<required: artifact id>", "ref": {"kind": "<required: digest | salted-digest>",
     "dig": {"alg": "sha-256", "val": "<required: base64url SHA-256>"}, "loc": "<optional URI>"},
     "proves": "<required: WHAT IT PROVES>"}
  ],
  "context_passed": [{"name": "<ITEM>", "value": "<MINIMUM DATA>"}],
  "context_withheld": [{"item": "<required: ITEM left out>", "reason": "<required: REASON>"}],
  "assumptions": [{"item": "<required: ASSUMPTION or unknown>", "validation": "<required: how to VALIDATE it>"}],
  "attempts": [{"attempt": "<required: ATTEMPT>", "result": "<required: RESULT>", "evidence": ["<artifact id>"]}],
  "pending": [
    {"kind": "<required: approval | side-effect>", "item": "<required: ITEM>",
     "action": "<must-ask ACTION it unlocks>", "owner": "<required: OWNER>"}
  ],
  "next_action": {"action": "<required: ONE ACTION, in allowed>", "description": "<what and how far>"},
  "verification": {"check": "<required: CHECK to run after the next action>"},
  "timeouts": [
    {"condition": "<required, at least one timeout: CONDITION for escalation>", "owner": "<required: OWNER>",
     "at": "<optional RFC 3339 time>"}
  ],
  "rollback": {"method": "<required: METHOD of rollback or recovery>"}
}
`

// Template returns the annotated empty package: each value says what goes
// there, and starts "required" for a field without which Build refuses
// the package (an *IncompleteError) and Check reports it. Required are
// the sender's and receiver's roles, the control mode, the outcome and
// its done condition, at least one allowed action, state and timeout, the
// next action, its verification and the rollback method, and within each
// entry of a list the members so marked; Build sets the handoff id and
// time and the agents. The receiver's acknowledgement is not in it: it
// travels as the hop's status.
func Template() []byte { return []byte(template) }
