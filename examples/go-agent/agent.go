package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Market is what the agent needs from its sidecar: the registry (service invocation), the
// task board's `Task` actor (actor invocation) and the pub/sub broker (publishing).
type Market interface {
	// Register registers (or renews) a profile with a lease.
	Register(ctx context.Context, profile CapabilityProfile, leaseSeconds int) error
	// Acknowledge calls `Task/<taskID>.acknowledge_award`; the error is a transport failure,
	// the answer's `error` the actor's typed refusal.
	Acknowledge(ctx context.Context, taskID string, ack AwardAcknowledgement) (ActorAnswer, error)
	// Publish publishes `payload` as the data of a CloudEvent with id `messageID`.
	Publish(ctx context.Context, topic, messageID string, payload any) error
}

// Agent is the one agent this app brings to the market: it counts the words of a task's
// description, in one step, at its step price.
type Agent struct {
	Profile      CapabilityProfile
	AppID        string
	market       Market
	log          *slog.Logger
	runsInFlight atomic.Int64
}

// NewAgent makes the agent: wordsmith, skill count_words, answering its bids at appID.
func NewAgent(appID string, market Market, log *slog.Logger) *Agent {
	return &Agent{
		Profile: CapabilityProfile{
			AgentID:           "wordsmith",
			AgentName:         "Wordsmith (Go)",
			SkillTags:         []string{"count_words"},
			CostPerStepUSD:    0.0001,
			MaxSteps:          2,
			ModelTier:         "fast",
			BidAppID:          appID,
			MaxConcurrentRuns: 4,
		},
		AppID:  appID,
		market: market,
		log:    log,
	}
}

// Refusal is a typed error answer: an HTTP status and its ErrorBody.
type Refusal struct {
	Status int
	Body   ErrorBody
}

func (r *Refusal) Error() string { return r.Body.Error + ": " + r.Body.Message }

func refuse(status int, code, message string) *Refusal {
	return &Refusal{Status: status, Body: ErrorBody{Error: code, Message: message, Details: map[string]any{}}}
}

// CheckSolicitation reads a `POST /v1/bids` body: a BidSolicitation for this agent, for a
// task whose required skills it has. Anything else is refused as the Python agent apps
// refuse it (422 INVALID_ARGUMENT, 404 NOT_FOUND).
func (a *Agent) CheckSolicitation(body []byte) (BidSolicitation, *Refusal) {
	var s BidSolicitation
	if err := json.Unmarshal(body, &s); err != nil {
		return s, refuse(422, "INVALID_ARGUMENT", "invalid request: "+err.Error())
	}
	if s.AgentID == "" || s.Task.TaskID == "" || len(s.Task.RequiredSkills) == 0 || s.RespondWithinMs <= 0 {
		return s, refuse(422, "INVALID_ARGUMENT",
			"invalid request: agent_id, task (task_id, required_skills) and respond_within_ms are required")
	}
	if s.AgentID != a.Profile.AgentID {
		return s, refuse(404, "NOT_FOUND", fmt.Sprintf("no agent %q in this app", s.AgentID))
	}
	for _, skill := range s.Task.RequiredSkills {
		if !slices.Contains(a.Profile.SkillTags, skill) {
			return s, refuse(422, "INVALID_ARGUMENT",
				fmt.Sprintf("agent %s lacks a required skill of the task", a.Profile.AgentID))
		}
	}
	return s, nil
}

// Bid is the agent's own estimate: one step at its step price; 0.95 sure when idle, down to
// 0.55 when all its run slots are taken.
func (a *Agent) Bid(s BidSolicitation) BidOffer {
	load := float64(a.runsInFlight.Load()) / float64(a.Profile.MaxConcurrentRuns)
	if load > 1 {
		load = 1
	}
	words := len(strings.Fields(s.Task.Description))
	return BidOffer{
		SelfReportedSuccessProb: round(0.95-0.4*load, 3),
		EstimatedCostUSD:        round(a.Profile.CostPerStepUSD, 6),
		EstimatedSteps:          1,
		Rationale:               fmt.Sprintf("%s: one step to count %d words", a.Profile.AgentName, words),
	}
}

// CountWords is the work: the number of whitespace-separated words.
func CountWords(text string) int { return len(strings.Fields(text)) }

// Outcome of the award: its word count, one step at the step price, no model tokens.
func (a *Agent) Outcome(award TaskAwarded, spec TaskSpec) TaskOutcome {
	return TaskOutcome{
		TaskID:        award.TaskID,
		AgentID:       award.AgentID,
		ActualSuccess: true,
		ActualCostUSD: a.Profile.CostPerStepUSD,
		ActualSteps:   1,
		Summary:       strconv.Itoa(CountWords(spec.Description)),
		ToolsCalled:   []string{}, // it calls none; an empty list, never null
		AwardToken:    award.AwardToken,
	}
}

// errRetry marks a failure a later delivery may get past (the broker delivers it again).
var errRetry = errors.New("retry")

// HandleAward takes one `agora.task.awarded` event's data. Awards of other agents are
// ignored; this agent's are acknowledged on the task board with the award's token, checked
// against the board's record, done, and reported on `agora.task.outcome`. A message that can
// never be taken (it does not parse, the board refuses the token, it disagrees with the
// board) is dead-lettered with the reason; a failure that may pass (the sidecar, the board
// not answering, a failed publish) is returned wrapping errRetry, for the broker to deliver
// the award again. Every step is safe to repeat: the board acknowledges the same award
// again, and the outcome's message id is `outcome:<task_id>`.
func (a *Agent) HandleAward(ctx context.Context, messageID string, data []byte) error {
	var award TaskAwarded
	var spec TaskSpec
	if err := decodeAward(data, &award, &spec); err != nil {
		return a.deadLetter(ctx, messageID, "payload failed validation: "+err.Error(), data)
	}
	if award.AgentID != a.Profile.AgentID {
		return nil // another app's agent
	}
	a.runsInFlight.Add(1)
	defer a.runsInFlight.Add(-1)

	answer, err := a.market.Acknowledge(ctx, award.TaskID, AwardAcknowledgement{
		AgentID: award.AgentID, AwardToken: award.AwardToken,
	})
	if err != nil {
		return fmt.Errorf("%w: acknowledging %s: %v", errRetry, award.TaskID, err)
	}
	if answer.Error != nil {
		if answer.Error.Error == codeInternal {
			return fmt.Errorf("%w: the task board failed: %s", errRetry, answer.Error.Message)
		}
		return a.deadLetter(ctx, messageID, answer.Error.Error+": "+answer.Error.Message, data)
	}
	var record TaskRecord
	if err := json.Unmarshal(answer.Result, &record); err != nil {
		return fmt.Errorf("%w: the task board's record does not parse: %v", errRetry, err)
	}
	var held json.RawMessage
	if record.Allocation != nil {
		held = record.Allocation.WinningBid
	}
	if !sameJSON(record.Spec, award.Spec) || !sameJSON(held, award.Bid) {
		reason := fmt.Sprintf("award for %s does not match the task board's record", award.TaskID)
		return a.deadLetter(ctx, messageID, reason, data)
	}
	if len(record.Outcome) > 0 && !bytes.Equal(bytes.TrimSpace(record.Outcome), []byte("null")) {
		return nil // a redelivery of an award whose task is done
	}

	outcome := a.Outcome(award, spec)
	if err := a.market.Publish(ctx, TopicOutcome, "outcome:"+award.TaskID, outcome); err != nil {
		return fmt.Errorf("%w: publishing the outcome of %s: %v", errRetry, award.TaskID, err)
	}
	a.log.Info("task done", "task_id", award.TaskID, "words", outcome.Summary)
	return nil
}

func decodeAward(data []byte, award *TaskAwarded, spec *TaskSpec) error {
	if err := json.Unmarshal(data, award); err != nil {
		return err
	}
	if award.TaskID == "" || award.AgentID == "" || len(award.AwardToken) < 16 || len(award.Spec) == 0 ||
		len(award.Bid) == 0 {
		return errors.New("task_id, agent_id, spec, bid and award_token (16+ characters) are required")
	}
	if err := json.Unmarshal(award.Spec, spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if spec.TaskID != award.TaskID {
		return errors.New("spec.task_id is not the award's task_id")
	}
	return nil
}

// deadLetter publishes why a message was refused, with the message, and takes it off the
// topic (a publish that fails leaves it for the broker to deliver again).
func (a *Agent) deadLetter(ctx context.Context, messageID, reason string, data []byte) error {
	var payload any
	if err := json.Unmarshal(data, &payload); err != nil {
		payload = string(data)
	}
	letter := DeadLetter{
		Topic:      TopicAwarded,
		Subscriber: a.AppID,
		Reason:     cut(reason, 16_384),
		Errors:     []map[string]any{},
		Payload:    payload,
		RefusedAt:  time.Now().UTC().Format(time.RFC3339Nano),
	}
	if messageID != "" {
		id := cut(messageID, 2_048)
		letter.MessageID = &id
	}
	a.log.Warn("message dead-lettered", "topic", TopicAwarded, "message_id", messageID, "reason", reason)
	if err := a.market.Publish(ctx, TopicDeadLetter, newID(), letter); err != nil {
		return fmt.Errorf("%w: dead-lettering: %v", errRetry, err)
	}
	return nil
}

// RegisterProfile registers the agent's profile with a lease.
func (a *Agent) RegisterProfile(ctx context.Context, leaseSeconds int) error {
	return a.market.Register(ctx, a.Profile, leaseSeconds)
}

// sameJSON: two JSON texts hold the same value (key order and spacing aside).
func sameJSON(x, y json.RawMessage) bool {
	var a, b any
	if json.Unmarshal(x, &a) != nil || json.Unmarshal(y, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

func round(x float64, places int) float64 {
	p, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', places, 64), 64)
	return p
}
