package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// fakeMarket records what the agent sends and answers as the test says.
type fakeMarket struct {
	acks       []AwardAcknowledgement
	answer     ActorAnswer
	ackErr     error
	published  map[string][]any // topic -> payloads
	messageIDs []string
	publishErr error
}

func (f *fakeMarket) Register(context.Context, CapabilityProfile, int) error { return nil }

func (f *fakeMarket) Acknowledge(_ context.Context, _ string, ack AwardAcknowledgement) (ActorAnswer, error) {
	f.acks = append(f.acks, ack)
	return f.answer, f.ackErr
}

func (f *fakeMarket) Publish(_ context.Context, topic, messageID string, payload any) error {
	if f.publishErr != nil {
		return f.publishErr
	}
	if f.published == nil {
		f.published = map[string][]any{}
	}
	f.published[topic] = append(f.published[topic], payload)
	f.messageIDs = append(f.messageIDs, messageID)
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const (
	spec  = `{"task_id":"t-1","description":"count  these four\nwords","required_skills":["count_words"],"preferred_skills":[],"budget_usd":null,"min_success_threshold":0.5,"deadline_ms":null,"bid_deadline_ms":null,"allow_partial":false}`
	bid   = `{"task_id":"t-1","agent_id":"wordsmith","self_reported_success_prob":0.95,"estimated_cost_usd":0.0001,"estimated_steps":1,"rationale":"r","fallback":false,"fallback_reason":null}`
	token = "0123456789abcdef0123"
)

func award(agentID string) []byte {
	return []byte(`{"task_id":"t-1","agent_id":"` + agentID + `","spec":` + spec + `,"bid":` + bid +
		`,"score":{"bid_id":"b","agent_id":"wordsmith","raw_success_prob":0.9,"calibrated_success_prob":0.9,"reputation_score":0.5,"cost_score":1,"composite":0.7,"ucb_bonus":0.1,"final_score":0.8},"award_token":"` + token + `"}`)
}

// record is the board's answer to the acknowledgment: the same spec and bid (keys in another
// order: the comparison is by value), and an outcome when the task is done.
func record(outcome string) ActorAnswer {
	var specValue map[string]any
	_ = json.Unmarshal([]byte(spec), &specValue)
	reordered, _ := json.Marshal(specValue) // Go sorts the keys
	result := `{"spec":` + string(reordered) + `,"status":"ALLOCATED","allocation":{"winning_bid":` + bid + `},"outcome":` + outcome + `}`
	return ActorAnswer{Result: json.RawMessage(result)}
}

func TestAnAwardOfThisAgentIsAcknowledgedDoneAndReported(t *testing.T) {
	market := &fakeMarket{answer: record("null")}
	agent := NewAgent("agents-go", market, quiet)

	if err := agent.HandleAward(context.Background(), "m-1", award("wordsmith")); err != nil {
		t.Fatal(err)
	}
	if len(market.acks) != 1 || market.acks[0] != (AwardAcknowledgement{AgentID: "wordsmith", AwardToken: token}) {
		t.Fatalf("acknowledgments: %+v", market.acks)
	}
	outcomes := market.published[TopicOutcome]
	if len(outcomes) != 1 || market.messageIDs[0] != "outcome:t-1" {
		t.Fatalf("outcomes %+v with ids %v", outcomes, market.messageIDs)
	}
	outcome := outcomes[0].(TaskOutcome)
	if outcome.Summary != "4" || !outcome.ActualSuccess || outcome.ActualSteps != 1 || outcome.AwardToken != token ||
		outcome.ActualCostUSD != 0.0001 || outcome.InputTokens != 0 || outcome.OutputTokens != 0 {
		t.Fatalf("outcome: %+v", outcome)
	}
}

func TestAnotherAgentsAwardIsLeftAlone(t *testing.T) {
	market := &fakeMarket{}
	if err := NewAgent("agents-go", market, quiet).HandleAward(context.Background(), "m", award("scout")); err != nil {
		t.Fatal(err)
	}
	if len(market.acks) != 0 || len(market.published) != 0 {
		t.Fatalf("touched another agent's award: %+v", market)
	}
}

func TestARedeliveredAwardOfADoneTaskIsNotDoneAgain(t *testing.T) {
	market := &fakeMarket{answer: record(`{"task_id":"t-1"}`)}
	if err := NewAgent("agents-go", market, quiet).HandleAward(context.Background(), "m", award("wordsmith")); err != nil {
		t.Fatal(err)
	}
	if len(market.published) != 0 {
		t.Fatalf("published %+v", market.published)
	}
}

func TestWhatCanNeverBeTakenIsDeadLetteredWithTheReason(t *testing.T) {
	mismatched := record("null")
	mismatched.Result = json.RawMessage(strings.Replace(string(mismatched.Result), `"estimated_steps":1`, `"estimated_steps":2`, 1))
	cases := map[string]struct {
		answer ActorAnswer
		data   []byte
		reason string
	}{
		"malformed":      {data: []byte(`{"task_id": 3}`), reason: "payload failed validation"},
		"no token":       {data: []byte(`{"task_id":"t-1","agent_id":"wordsmith","spec":{},"bid":{}}`), reason: "payload failed validation"},
		"refused token":  {answer: ActorAnswer{Error: &ErrorBody{Error: "AWARD_NOT_HELD", Message: "no award"}}, data: award("wordsmith"), reason: "AWARD_NOT_HELD: no award"},
		"not the record": {answer: mismatched, data: award("wordsmith"), reason: "does not match the task board's record"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			market := &fakeMarket{answer: c.answer}
			if err := NewAgent("agents-go", market, quiet).HandleAward(context.Background(), "m-9", c.data); err != nil {
				t.Fatal(err)
			}
			letters := market.published[TopicDeadLetter]
			if len(letters) != 1 || len(market.published[TopicOutcome]) != 0 {
				t.Fatalf("published %+v", market.published)
			}
			letter := letters[0].(DeadLetter)
			if !strings.Contains(letter.Reason, c.reason) || *letter.MessageID != "m-9" || letter.Subscriber != "agents-go" {
				t.Fatalf("letter %+v", letter)
			}
		})
	}
}

func TestWhatMayPassLaterIsRetried(t *testing.T) {
	cases := map[string]*fakeMarket{
		"sidecar down":   {ackErr: errors.New("unavailable")},
		"board failed":   {answer: ActorAnswer{Error: &ErrorBody{Error: "INTERNAL", Message: "see its log"}}},
		"publish failed": {answer: record("null"), publishErr: errors.New("broker down")},
	}
	for name, market := range cases {
		t.Run(name, func(t *testing.T) {
			err := NewAgent("agents-go", market, quiet).HandleAward(context.Background(), "m", award("wordsmith"))
			if !errors.Is(err, errRetry) {
				t.Fatalf("got %v, want a retry", err)
			}
		})
	}
}

func serveApp(t *testing.T, market Market) (*chi.Mux, *readiness) {
	t.Helper()
	router := chi.NewRouter()
	var ready readiness
	if _, err := newService(router, "127.0.0.1:0", NewAgent("agents-go", market, quiet), &ready, quiet); err != nil {
		t.Fatal(err)
	}
	return router, &ready
}

func post(router http.Handler, path, body string) *httptest.ResponseRecorder {
	answer := httptest.NewRecorder()
	request := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	request.Header.Set("Content-Type", "application/json")
	router.ServeHTTP(answer, request)
	return answer
}

func TestTheBidRouteAnswersAnOfferOrATypedRefusal(t *testing.T) {
	router, _ := serveApp(t, &fakeMarket{})
	solicitation := func(agentID, skill string) string {
		return `{"agent_id":"` + agentID + `","respond_within_ms":300,"task":{"task_id":"t-1","description":"one two three","required_skills":["` + skill + `"]}}`
	}

	answer := post(router, BidRoute, solicitation("wordsmith", "count_words"))
	var offer BidOffer
	if answer.Code != 200 || json.Unmarshal(answer.Body.Bytes(), &offer) != nil {
		t.Fatalf("%d %s", answer.Code, answer.Body)
	}
	if offer.EstimatedSteps != 1 || offer.EstimatedCostUSD != 0.0001 || offer.SelfReportedSuccessProb != 0.95 ||
		offer.Rationale != "Wordsmith (Go): one step to count 3 words" {
		t.Fatalf("offer %+v", offer)
	}

	for body, want := range map[string]struct {
		status int
		code   string
	}{
		solicitation("scout", "count_words"):    {404, "NOT_FOUND"},
		solicitation("wordsmith", "web_search"): {422, "INVALID_ARGUMENT"},
		`{"agent_id": "wordsmith"}`:             {422, "INVALID_ARGUMENT"},
		`not json`:                              {422, "INVALID_ARGUMENT"},
	} {
		answer := post(router, BidRoute, body)
		var refusal ErrorBody
		if answer.Code != want.status || json.Unmarshal(answer.Body.Bytes(), &refusal) != nil || refusal.Error != want.code {
			t.Fatalf("%s: %d %s", body, answer.Code, answer.Body)
		}
	}
}

func TestAnAwardDeliveredByDaprReachesTheAgent(t *testing.T) {
	market := &fakeMarket{answer: record("null")}
	router, _ := serveApp(t, market)
	event := `{"specversion":"1.0","id":"award:t-1.1","source":"taskboard","type":"agora.task.awarded.v1",` +
		`"datacontenttype":"application/json","topic":"agora.task.awarded","pubsubname":"agora-pubsub","data":` +
		string(award("wordsmith")) + `}`

	answer := post(router, "/events/"+TopicAwarded, event)
	if answer.Code != 200 || !strings.Contains(answer.Body.String(), "SUCCESS") {
		t.Fatalf("%d %s", answer.Code, answer.Body)
	}
	if len(market.published[TopicOutcome]) != 1 {
		t.Fatalf("published %+v", market.published)
	}

	market.publishErr = errors.New("broker down")
	answer = post(router, "/events/"+TopicAwarded, event)
	if !strings.Contains(answer.Body.String(), "RETRY") {
		t.Fatalf("%d %s", answer.Code, answer.Body)
	}
}

func TestReadyOnlyOnceRegistered(t *testing.T) {
	router, ready := serveApp(t, &fakeMarket{})
	get := func() int {
		answer := httptest.NewRecorder()
		router.ServeHTTP(answer, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return answer.Code
	}
	if code := get(); code < 300 {
		t.Fatalf("ready before registering: %d", code)
	}
	ready.set()
	if code := get(); code >= 300 {
		t.Fatalf("not ready after registering: %d", code)
	}
}

func TestCountWords(t *testing.T) {
	for text, want := range map[string]int{"": 0, "one": 1, "  two\twords \n": 2, "Count these five words": 4} {
		if got := CountWords(text); got != want {
			t.Errorf("%q: %d, want %d", text, got, want)
		}
	}
}
