package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// readiness: `/readyz` answers 2xx once the agent is registered.
type readiness struct{ ok atomic.Bool }

func (r *readiness) set()      { r.ok.Store(true) }
func (r *readiness) get() bool { return r.ok.Load() }

func readBody(r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("the body is over %d bytes", limit)
	}
	return body, nil
}

func readCloser(body []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(body)) }

// printSamples writes one of each body the agent sends, built by the code that sends them,
// keyed by the file of its JSON Schema in proto/jsonschema (a test validates them with the
// models the services validate with).
func printSamples(w io.Writer) error {
	agent := NewAgent("agents-go", nil, nil)
	solicitation := BidSolicitation{
		AgentID:         agent.Profile.AgentID,
		Task:            TaskSpec{TaskID: "sample-1", Description: "Count these words", RequiredSkills: agent.Profile.SkillTags},
		RespondWithinMs: 300,
	}
	award := TaskAwarded{TaskID: "sample-1", AgentID: agent.Profile.AgentID, AwardToken: "0123456789abcdef0123"}
	message := "sample-message"
	samples := map[string]any{
		"capability_profile.json":    agent.Profile,
		"bid_offer.json":             agent.Bid(solicitation),
		"award_acknowledgement.json": AwardAcknowledgement{AgentID: award.AgentID, AwardToken: award.AwardToken},
		"task_outcome.json":          agent.Outcome(award, solicitation.Task),
		"dead_letter.json": DeadLetter{
			Topic: TopicAwarded, MessageID: &message, Subscriber: agent.AppID, Reason: "sample",
			Errors: []map[string]any{}, Payload: map[string]any{"task_id": "x"}, RefusedAt: "2025-01-01T00:00:00Z",
		},
	}
	encoder := json.NewEncoder(w)
	encoder.SetIndent("", "  ")
	return encoder.Encode(samples)
}
