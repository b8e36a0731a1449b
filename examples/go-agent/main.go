// Command go-agent is an Agora agent app written in Go: one agent, wordsmith, that counts the
// words of a task's description. It runs beside its own daprd and speaks only Agora's
// documented contracts (proto/jsonschema): it registers its profile with the registry,
// answers the market's bid solicitations (`POST /v1/bids`), takes its awards from
// `agora.task.awarded`, acknowledges each on the task board's `Task` actor and reports the
// outcome on `agora.task.outcome`. Nothing of Agora's Python code is used.
//
//	go-agent            serve (APP_ID, APP_PORT, DAPR_GRPC_PORT from the environment)
//	go-agent samples    print one of each body it sends, keyed by its JSON Schema's file
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	dapr "github.com/dapr/go-sdk/client"
	"github.com/dapr/go-sdk/service/common"
	daprhttp "github.com/dapr/go-sdk/service/http"
	"github.com/go-chi/chi/v5"
)

// Settings come from the environment, as for every Agora app.
type Settings struct {
	AppID         string // APP_ID: its Dapr app id (agents-go)
	Host          string // AGORA_APP_HOST: where it listens (127.0.0.1: only its sidecar reaches it)
	Port          string // APP_PORT
	RegistryAppID string // AGORA_REGISTRY_APP_ID
	LeaseSeconds  int    // AGORA_AGENT_LEASE_SECONDS: renewed every third of it
}

func settingsFromEnv() (Settings, error) {
	s := Settings{
		AppID:         env("APP_ID", "agents-go"),
		Host:          env("AGORA_APP_HOST", "127.0.0.1"),
		Port:          env("APP_PORT", "8000"),
		RegistryAppID: env("AGORA_REGISTRY_APP_ID", "registry"),
	}
	lease, err := strconv.Atoi(env("AGORA_AGENT_LEASE_SECONDS", "60"))
	if err != nil || lease < MinLeaseSeconds || lease > 24*3600 {
		return s, fmt.Errorf("AGORA_AGENT_LEASE_SECONDS must be %d..86400 seconds", MinLeaseSeconds)
	}
	s.LeaseSeconds = lease
	return s, nil
}

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return fallback
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("app", "go-agent")
	if len(os.Args) > 1 && os.Args[1] == "samples" {
		if err := printSamples(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	settings, err := settingsFromEnv()
	if err != nil {
		log.Error("bad settings", "error", err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, settings, log); err != nil {
		log.Error("stopped", "error", err.Error())
		os.Exit(1)
	}
}

// serve runs the app until ctx ends: the HTTP side first (daprd waits for the app's port),
// then the client, the registration and its renewals; on the way out the agent registers
// once more with the shortest lease, so it leaves the market within seconds.
func serve(ctx context.Context, settings Settings, log *slog.Logger) error {
	market := &daprMarket{appID: settings.AppID, registry: settings.RegistryAppID}
	agent := NewAgent(settings.AppID, market, log)
	var ready readiness

	address := net.JoinHostPort(settings.Host, settings.Port)
	service, err := newService(chi.NewRouter(), address, agent, &ready, log)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- service.Start() }()

	client, err := connect(ctx, log)
	if err != nil {
		_ = service.Stop()
		if ctx.Err() != nil {
			return nil // stopped before the sidecar came up
		}
		return err
	}
	defer client.Close()
	market.client = client

	if err := registerUntilDone(ctx, agent, settings.LeaseSeconds, log); err == nil {
		ready.set()
		log.Info("agent registered", "agent_id", agent.Profile.AgentID, "lease_s", settings.LeaseSeconds)
		go renew(ctx, agent, settings.LeaseSeconds, log)
	}

	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	// Leave the market: the shortest lease, then stop taking requests.
	bye, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := agent.RegisterProfile(bye, MinLeaseSeconds); err != nil {
		log.Warn("leaving the market failed; the lease runs out by itself", "error", err.Error())
	} else {
		log.Info("agent leaves the market", "within_s", MinLeaseSeconds)
	}
	return service.Stop()
}

// newService is the app's side of Dapr, on the Dapr Go SDK's HTTP service: the bid route,
// the award subscription, `/healthz` (the SDK's) and `/readyz`.
func newService(router *chi.Mux, address string, agent *Agent, ready *readiness, log *slog.Logger) (common.Service, error) {
	// Refusals are typed (404 NOT_FOUND, 422 INVALID_ARGUMENT, with an ErrorBody), as every
	// Agora app answers them; the SDK's invocation handler answers the offers.
	router.Use(checkBids(agent))
	service := daprhttp.NewServiceWithMux(address, router)

	bid := func(ctx context.Context, in *common.InvocationEvent) (*common.Content, error) {
		solicitation, refusal := agent.CheckSolicitation(in.Data)
		if refusal != nil { // checked already; kept for a handler reached some other way
			return nil, refusal
		}
		body, err := json.Marshal(agent.Bid(solicitation))
		if err != nil {
			return nil, err
		}
		return &common.Content{Data: body, ContentType: "application/json"}, nil
	}
	if err := service.AddServiceInvocationHandler(BidRoute, bid); err != nil {
		return nil, err
	}

	awarded := &common.Subscription{
		PubsubName:      PubSub,
		Topic:           TopicAwarded,
		Route:           "/events/" + TopicAwarded,
		DeadLetterTopic: TopicDeadLetter,
	}
	onAward := func(ctx context.Context, event *common.TopicEvent) (bool, error) {
		if err := agent.HandleAward(ctx, event.ID, event.RawData); err != nil {
			log.Warn("award not taken yet; delivered again later", "message_id", event.ID, "error", err.Error())
			return true, err
		}
		return false, nil
	}
	if err := service.AddTopicEventHandler(awarded, onAward); err != nil {
		return nil, err
	}

	if err := service.AddHealthCheckHandler("readyz", func(context.Context) error {
		if !ready.get() {
			return errors.New("not registered yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return service, nil
}

// checkBids answers a bid solicitation the agent refuses with its typed error, before the
// SDK's handler (which would answer every error 500) is reached.
func checkBids(agent *Agent) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != BidRoute || r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			body, err := readBody(r, 1<<20)
			if err != nil {
				writeRefusal(w, refuse(http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", err.Error()))
				return
			}
			if _, refusal := agent.CheckSolicitation(body); refusal != nil {
				writeRefusal(w, refusal)
				return
			}
			r.Body = readCloser(body)
			next.ServeHTTP(w, r)
		})
	}
}

func writeRefusal(w http.ResponseWriter, refusal *Refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(refusal.Status)
	_ = json.NewEncoder(w).Encode(refusal.Body)
}

// connect opens the Dapr client on DAPR_GRPC_PORT, waiting for the sidecar to come up.
func connect(ctx context.Context, log *slog.Logger) (dapr.Client, error) {
	address := net.JoinHostPort("127.0.0.1", env("DAPR_GRPC_PORT", "50001"))
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		client, err := dapr.NewClientWithAddressContext(attempt, address)
		cancel()
		if err == nil {
			return client, nil
		}
		log.Info("waiting for the sidecar", "address", address, "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// registerUntilDone registers the profile, retrying while the registry is not reachable yet.
func registerUntilDone(ctx context.Context, agent *Agent, leaseSeconds int, log *slog.Logger) error {
	delay := 200 * time.Millisecond
	for {
		err := agent.RegisterProfile(ctx, leaseSeconds)
		if err == nil {
			return nil
		}
		log.Warn("registering the agent failed; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// renew registers the profile again every third of its lease (a second later after a failure).
func renew(ctx context.Context, agent *Agent, leaseSeconds int, log *slog.Logger) {
	interval := time.Duration(leaseSeconds) * time.Second / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		for agent.RegisterProfile(ctx, leaseSeconds) != nil && ctx.Err() == nil {
			log.Warn("renewing the agent's lease failed; retrying")
			time.Sleep(time.Second)
		}
	}
}

// daprMarket is the Market through the sidecar, with the Dapr Go SDK's client.
type daprMarket struct {
	client   dapr.Client
	appID    string
	registry string
}

// Register invokes the registry through the SDK client (gRPC to the sidecar, HTTP to the
// registry app). Dapr 1.18 logs this gRPC-to-HTTP path as deprecated in favour of its HTTP
// invocation API (`POST /v1.0/invoke/registry/method/v1/agents`), which carries the same body.
func (m *daprMarket) Register(ctx context.Context, profile CapabilityProfile, leaseSeconds int) error {
	body, err := json.Marshal(profile)
	if err != nil {
		return err
	}
	method := fmt.Sprintf("%s?lease_seconds=%d", RegisterMethod, leaseSeconds)
	call, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = m.client.InvokeMethodWithContent(call, m.registry, method, "post",
		&dapr.DataContent{ContentType: "application/json", Data: body})
	return err
}

func (m *daprMarket) Acknowledge(ctx context.Context, taskID string, ack AwardAcknowledgement) (ActorAnswer, error) {
	var answer ActorAnswer
	body, err := json.Marshal(ack)
	if err != nil {
		return answer, err
	}
	call, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := m.client.InvokeActor(call, &dapr.InvokeActorRequest{
		ActorType: TaskActor, ActorID: taskID, Method: AcknowledgeCall, Data: body,
	})
	if err != nil {
		return answer, err
	}
	if err := json.Unmarshal(out.Data, &answer); err != nil {
		return answer, fmt.Errorf("the actor's answer does not parse: %w", err)
	}
	return answer, nil
}

// Publish sends the payload as the data of a CloudEvent of its own (id, source, type), as
// Agora's services do, so the message id is the one receivers deduplicate on.
func (m *daprMarket) Publish(ctx context.Context, topic, messageID string, payload any) error {
	event, err := json.Marshal(cloudEvent(m.appID, topic, messageID, payload))
	if err != nil {
		return err
	}
	call, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.client.PublishEvent(call, PubSub, topic, event,
		dapr.PublishEventWithContentType("application/cloudevents+json"))
}

func cloudEvent(source, topic, id string, payload any) map[string]any {
	eventType := topic + ".v1"
	if topic == TopicDeadLetter {
		eventType = "agora.deadletter.v1"
	}
	return map[string]any{
		"specversion":     "1.0",
		"id":              id,
		"source":          source,
		"type":            eventType,
		"time":            time.Now().UTC().Format(time.RFC3339Nano),
		"datacontenttype": "application/json",
		"data":            payload,
	}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
