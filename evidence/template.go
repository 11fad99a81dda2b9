package evidence

// template is the annotated empty package: every member of the contract's
// template, each value a description of what goes there in angle brackets.
// It is JSON; times are RFC 3339 and lists may be empty.
const template = `{
  "handoff": {
    "id": "<HopId of the offer this package rides with>",
    "time": "<RFC 3339 time inside the offer's [iat, exp]>"
  },
  "sender": {"role": "<ROLE of the sending owner>", "agent": "<AgentId: the offer's iss>"},
  "receiver": {"role": "<ROLE of the receiving owner>", "agent": "<AgentId: the offer's aud>"},
  "control": "<transfer-ownership | specialist-returns-result>",
  "outcome": {"result": "<RESULT wanted>", "done_when": "<ACCEPTANCE condition>"},
  "authority": {
    "allowed": ["<ACTION the receiver may take>"],
    "must_ask": ["<ACTION that needs an approval first>"],
    "denied": ["<ACTION the receiver may never take>"]
  },
  "state": [
    {"system": "<SYSTEM OF RECORD>", "state": "<STATE it holds>", "as_of": "<RFC 3339 time observed>",
     "evidence": ["<artifact id>"]}
  ],
  "completed": [
    {"action": "<ACTION taken>", "external": true, "operation_id": "<OPERATION ID>",
     "idempotency_key": "<IDEMPOTENCY KEY>", "postcondition": "<POSTCONDITION that holds>",
     "evidence": ["<artifact id>"]}
  ],
  "artifacts": [
    {"id": "<artifact id>", "ref": {"kind": "<digest | salted-digest>",
     "dig": {"alg": "sha-256", "val": "<base64url SHA-256>"}, "loc": "<optional URI>"},
     "proves": "<WHAT IT PROVES>"}
  ],
  "context_passed": [{"name": "<ITEM>", "value": "<MINIMUM DATA>"}],
  "context_withheld": [{"item": "<ITEM left out>", "reason": "<REASON>"}],
  "assumptions": [{"item": "<ASSUMPTION or unknown>", "validation": "<how to VALIDATE it>"}],
  "attempts": [{"attempt": "<ATTEMPT>", "result": "<RESULT>", "evidence": ["<artifact id>"]}],
  "pending": [
    {"kind": "<approval | side-effect>", "item": "<ITEM>", "action": "<must-ask ACTION it unlocks>",
     "owner": "<OWNER>"}
  ],
  "next_action": {"action": "<ONE ACTION, in allowed>", "description": "<what and how far>"},
  "verification": {"check": "<CHECK to run after the next action>"},
  "timeouts": [{"condition": "<CONDITION for escalation>", "owner": "<OWNER>", "at": "<optional RFC 3339 time>"}],
  "rollback": {"method": "<METHOD of rollback or recovery>"}
}
`

// Template returns the annotated empty package. The receiver's
// acknowledgement is not in it: it travels as the hop's status.
func Template() []byte { return []byte(template) }
