package main

// Agora's contracts this agent speaks, as Go types. Each one mirrors a JSON Schema of
// proto/jsonschema (named beside it); the services validate every body against the same
// models those schemas are generated from, so a body that drifts from them is refused.
// Bodies the agent only passes on or compares (a task's spec, the winning bid, the score)
// stay raw JSON: it never needs to know more of them than the schema promises.

import "encoding/json"

// Topics, pub/sub and routes (docs/architecture.md, proto/README.md).
const (
	PubSub          = "agora-pubsub"
	TopicAwarded    = "agora.task.awarded"
	TopicOutcome    = "agora.task.outcome"
	TopicDeadLetter = "agora.deadletter"
	BidRoute        = "/v1/bids"
	RegisterMethod  = "v1/agents"
	TaskActor       = "Task"
	AcknowledgeCall = "acknowledge_award"
	// MinLeaseSeconds is the shortest lease the registry grants: on shutdown the agent
	// registers once more with it, so it leaves the market within seconds.
	MinLeaseSeconds = 5
)

// CapabilityProfile: capability_profile.json (`POST /v1/agents?lease_seconds=N` on the registry).
type CapabilityProfile struct {
	AgentID        string   `json:"agent_id"`
	AgentName      string   `json:"agent_name"`
	SkillTags      []string `json:"skill_tags"`
	CostPerStepUSD float64  `json:"cost_per_step_usd"`
	MaxSteps       int      `json:"max_steps"`
	ModelTier      string   `json:"model_tier"`
	LatencySLAMs   *int     `json:"latency_sla_ms"` // none promised
	BidAppID       string   `json:"bid_app_id"`
	// MaxConcurrentRuns: the runs it takes at once; the market never awards it more.
	MaxConcurrentRuns int `json:"max_concurrent_runs"`
}

// TaskSpec: the `TaskSpec` of bid_solicitation.json and task_awarded.json, the fields this
// agent reads.
type TaskSpec struct {
	TaskID         string   `json:"task_id"`
	Description    string   `json:"description"`
	RequiredSkills []string `json:"required_skills"`
}

// BidSolicitation: bid_solicitation.json (the body of `POST /v1/bids`).
type BidSolicitation struct {
	AgentID         string   `json:"agent_id"`
	Task            TaskSpec `json:"task"`
	RespondWithinMs int      `json:"respond_within_ms"`
}

// BidOffer: bid_offer.json (the answer of `POST /v1/bids`).
type BidOffer struct {
	SelfReportedSuccessProb float64 `json:"self_reported_success_prob"`
	EstimatedCostUSD        float64 `json:"estimated_cost_usd"`
	EstimatedSteps          int     `json:"estimated_steps"`
	Rationale               string  `json:"rationale"`
}

// TaskAwarded: task_awarded.json (topic agora.task.awarded). Spec and Bid are kept as sent,
// to be compared with the task board's record.
type TaskAwarded struct {
	TaskID     string          `json:"task_id"`
	AgentID    string          `json:"agent_id"`
	Spec       json.RawMessage `json:"spec"`
	Bid        json.RawMessage `json:"bid"`
	Score      json.RawMessage `json:"score"`
	AwardToken string          `json:"award_token"`
}

// AwardAcknowledgement: award_acknowledgement.json (`Task` actor `acknowledge_award`).
type AwardAcknowledgement struct {
	AgentID    string `json:"agent_id"`
	AwardToken string `json:"award_token"`
}

// ErrorBody: the body of every error answer (docs/architecture.md, "Errors").
type ErrorBody struct {
	Error   string         `json:"error"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// ActorAnswer: what every Agora actor method answers, its result or its typed error.
type ActorAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *ErrorBody      `json:"error"`
}

// TaskRecord: task_record.json (the `Task` actor's result), the fields this agent checks.
type TaskRecord struct {
	Spec       json.RawMessage `json:"spec"`
	Allocation *struct {
		WinningBid json.RawMessage `json:"winning_bid"`
	} `json:"allocation"`
	Outcome json.RawMessage `json:"outcome"`
}

// TaskOutcome: task_outcome.json (topic agora.task.outcome, message id `outcome:<task_id>`).
type TaskOutcome struct {
	TaskID        string   `json:"task_id"`
	AgentID       string   `json:"agent_id"`
	ActualSuccess bool     `json:"actual_success"`
	ActualCostUSD float64  `json:"actual_cost_usd"`
	ActualSteps   int      `json:"actual_steps"`
	Partial       bool     `json:"partial"`
	Summary       string   `json:"summary"`
	InputTokens   int      `json:"input_tokens"`
	OutputTokens  int      `json:"output_tokens"`
	ToolsCalled   []string `json:"tools_called"`
	AwardToken    string   `json:"award_token"`
}

// DeadLetter: dead_letter.json (topic agora.deadletter): a message this agent refused, with
// why, so nothing is lost.
type DeadLetter struct {
	Topic      string           `json:"topic"`
	MessageID  *string          `json:"message_id"`
	Subscriber string           `json:"subscriber"`
	Reason     string           `json:"reason"`
	Errors     []map[string]any `json:"errors"`
	Payload    any              `json:"payload"`
	RefusedAt  string           `json:"refused_at"`
}

// codeInternal is the one error code a retry may get past (the service failed, not the
// request); every other code means the same request fails the same way again.
const codeInternal = "INTERNAL"
