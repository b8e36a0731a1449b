// Package rabbitmq is a RabbitMQ pub/sub component (`pubsub.agora.rabbitmq`) in which every
// subscription owns its AMQP connection and channel.
//
// Dapr's own RabbitMQ component (components-contrib 1.18.3) shares one channel between a
// sidecar's subscriptions and its publishes. After the broker restarts, the subscriptions
// re-subscribe at once on that channel; the calls interleave (`Exception (503) Reason:
// "unexpected command received"`), and a consumer the broker registered can be lost track of
// (dapr/components-contrib#4540). The broker keeps handing that consumer deliveries that nothing
// reads or acknowledges, so messages are held until the sidecar restarts. Here a subscription
// never shares a channel: when its connection drops it closes what it had and starts over
// alone, so every consumer the broker holds is one a subscription reads.
//
// The topology is the one Dapr's component makes, so the two can be swapped: a durable fanout
// exchange per topic, and per subscriber a queue `<consumerID>-<topic>` bound to it (replicas of
// one app share the queue, each message goes to one of them), with the same metadata names.
// Publishes are persistent and always confirmed by the broker (`publisherConfirm` is read by
// Dapr's component only); a delivery is acknowledged after the app took it, and put back in
// its queue (`requeueInFailure`) when the app's handler (with the sidecar's retries and dead
// letters) gave up.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dapr/components-contrib/metadata"
	"github.com/dapr/components-contrib/pubsub"
	"github.com/dapr/kit/logger"
	kitmd "github.com/dapr/kit/metadata"
)

const (
	exchangeKind = "fanout"
	// How long a subscription waits before connecting again; doubled per failure up to maxWait.
	firstWait = 500 * time.Millisecond
	maxWait   = 10 * time.Second
	// Subscribe waits this long for the first consumer to be registered. It then returns
	// without one, with a warning, and the subscription goes on trying: daprd does not try a
	// subscription whose Subscribe failed again (dapr/components-contrib#4335).
	subscribeTimeout = 30 * time.Second
)

type options struct {
	ConnectionString  string `mapstructure:"connectionString"`
	ConsumerID        string `mapstructure:"consumerID"`
	Durable           bool   `mapstructure:"durable"`
	DeletedWhenUnused bool   `mapstructure:"deletedWhenUnused"`
	DeliveryMode      uint8  `mapstructure:"deliveryMode"`
	RequeueInFailure  bool   `mapstructure:"requeueInFailure"`
	PrefetchCount     int    `mapstructure:"prefetchCount"`
	MaxLen            int64  `mapstructure:"maxLen"`
}

// Component is the pub/sub component; New makes one.
type Component struct {
	log     logger.Logger
	opts    options
	closed  atomic.Bool
	closeCh chan struct{}
	wg      sync.WaitGroup

	// The publishing connection and channel, made on first use and again after they close.
	pubMu      sync.Mutex
	pubConn    *amqp.Connection
	pubChannel *amqp.Channel
	declared   map[string]bool // exchanges declared on pubChannel
}

// New returns the component (registered in cmd/daprd as "agora.rabbitmq").
func New(log logger.Logger) pubsub.PubSub {
	return &Component{log: log, closeCh: make(chan struct{})}
}

func (c *Component) Init(ctx context.Context, meta pubsub.Metadata) error {
	opts := options{Durable: true, DeliveryMode: amqp.Persistent, RequeueInFailure: true, PrefetchCount: 50}
	if err := kitmd.DecodeMetadata(meta.Properties, &opts); err != nil {
		return fmt.Errorf("agora.rabbitmq: metadata: %w", err)
	}
	if opts.ConnectionString == "" {
		return errors.New("agora.rabbitmq: connectionString is required")
	}
	if opts.PrefetchCount < 0 {
		return errors.New("agora.rabbitmq: prefetchCount must be 0 or more")
	}
	c.opts = opts
	// Reach the broker once, so that a wrong address fails the sidecar's start.
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	_, err := c.publishChannel()
	return err
}

func (c *Component) Features() []pubsub.Feature { return nil }

func (c *Component) GetComponentMetadata() metadata.MetadataMap { return metadata.MetadataMap{} }

// publishChannel returns the publishing channel, connecting first if there is none; pubMu held.
func (c *Component) publishChannel() (*amqp.Channel, error) {
	if c.pubChannel != nil && !c.pubChannel.IsClosed() {
		return c.pubChannel, nil
	}
	c.dropPublisher()
	conn, err := amqp.Dial(c.opts.ConnectionString)
	if err != nil {
		return nil, fmt.Errorf("agora.rabbitmq: connecting: %w", err)
	}
	channel, err := conn.Channel()
	if err == nil {
		err = channel.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("agora.rabbitmq: opening the publishing channel: %w", err)
	}
	c.pubConn, c.pubChannel, c.declared = conn, channel, map[string]bool{}
	return channel, nil
}

// dropPublisher closes the publishing connection, if any; pubMu held.
func (c *Component) dropPublisher() {
	if c.pubConn != nil {
		_ = c.pubConn.Close()
	}
	c.pubConn, c.pubChannel, c.declared = nil, nil, nil
}

func (c *Component) Publish(ctx context.Context, req *pubsub.PublishRequest) error {
	if c.closed.Load() {
		return pubsub.NewTerminalError(errors.New("agora.rabbitmq: component is closed"))
	}
	confirm, err := c.send(ctx, req)
	if err != nil {
		return pubsub.NewRetriableError(err)
	}
	// Waited for outside the lock: publishes of one sidecar share the channel, not the wait.
	acked, err := confirm.WaitContext(ctx)
	if err != nil {
		return pubsub.NewRetriableError(fmt.Errorf("agora.rabbitmq: waiting for the broker's confirmation: %w", err))
	}
	if !acked {
		return pubsub.NewRetriableError(fmt.Errorf("agora.rabbitmq: the broker refused the message to %s", req.Topic))
	}
	return nil
}

func (c *Component) send(ctx context.Context, req *pubsub.PublishRequest) (*amqp.DeferredConfirmation, error) {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	channel, err := c.publishChannel()
	if err != nil {
		return nil, err
	}
	if !c.declared[req.Topic] {
		if err = c.declareExchange(channel, req.Topic); err != nil {
			c.dropPublisher()
			return nil, err
		}
		c.declared[req.Topic] = true
	}
	message := amqp.Publishing{ContentType: "text/plain", Body: req.Data, DeliveryMode: c.opts.DeliveryMode}
	if req.ContentType != nil {
		message.ContentType = *req.ContentType
	}
	confirm, err := channel.PublishWithDeferredConfirmWithContext(ctx, req.Topic, "", false, false, message)
	if err != nil {
		c.dropPublisher()
		return nil, fmt.Errorf("agora.rabbitmq: publishing to %s: %w", req.Topic, err)
	}
	return confirm, nil
}

func (c *Component) declareExchange(channel *amqp.Channel, topic string) error {
	err := channel.ExchangeDeclare(topic, exchangeKind, c.opts.Durable, c.opts.DeletedWhenUnused, false, false, nil)
	if err != nil {
		return fmt.Errorf("agora.rabbitmq: declaring the exchange %s: %w", topic, err)
	}
	return nil
}

func (c *Component) Subscribe(ctx context.Context, req pubsub.SubscribeRequest, handler pubsub.Handler) error {
	if c.closed.Load() {
		return errors.New("agora.rabbitmq: component is closed")
	}
	queue := req.Metadata["queueName"]
	if queue == "" {
		if c.opts.ConsumerID == "" {
			return errors.New("agora.rabbitmq: consumerID is required for a subscription without a queueName")
		}
		queue = c.opts.ConsumerID + "-" + req.Topic
	}
	subscription, cancel := context.WithCancel(ctx)
	registered := make(chan struct{}) // closed once the first consumer is registered
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		c.subscribeForever(subscription, req.Topic, queue, handler, registered)
	}()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-subscription.Done():
		case <-c.closeCh:
			cancel()
		}
	}()
	select {
	case <-registered:
		return nil
	case <-time.After(subscribeTimeout):
		c.log.Warnf("agora.rabbitmq: no consumer on %s after %s; still trying", queue, subscribeTimeout)
		return nil
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
}

// subscribeForever consumes the queue on a connection of its own, connecting again (with
// backoff) whenever the connection or channel closes, until ctx ends.
func (c *Component) subscribeForever(ctx context.Context, topic, queue string, handler pubsub.Handler, registered chan struct{}) {
	wait := firstWait
	for {
		err := c.consume(ctx, topic, queue, handler, func() {
			wait = firstWait
			if registered != nil {
				close(registered)
				registered = nil
			}
		})
		if ctx.Err() != nil {
			return
		}
		c.log.Warnf("agora.rabbitmq: subscription to %s ended (%v); connecting again in %s", queue, err, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, maxWait)
	}
}

// consume runs one connection's life of a subscription: declare, bind, consume, and hand
// every delivery to the app, until the channel closes or ctx ends.
func (c *Component) consume(ctx context.Context, topic, queue string, handler pubsub.Handler, onConsuming func()) error {
	conn, err := amqp.Dial(c.opts.ConnectionString)
	if err != nil {
		return err
	}
	defer conn.Close()
	channel, err := conn.Channel()
	if err != nil {
		return err
	}
	if err = channel.Qos(c.opts.PrefetchCount, 0, false); err != nil {
		return err
	}
	if err = c.declareExchange(channel, topic); err != nil {
		return err
	}
	args := amqp.Table{}
	if c.opts.MaxLen > 0 {
		args["x-max-length"] = c.opts.MaxLen
	}
	if _, err = channel.QueueDeclare(queue, c.opts.Durable, c.opts.DeletedWhenUnused, false, false, args); err != nil {
		return err
	}
	if err = channel.QueueBind(queue, "", topic, false, nil); err != nil {
		return err
	}
	deliveries, err := channel.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	c.log.Infof("agora.rabbitmq: consuming %s", queue)
	onConsuming()
	closed := channel.NotifyClose(make(chan *amqp.Error, 1))
	var handling sync.WaitGroup
	defer handling.Wait()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case reason := <-closed:
			return fmt.Errorf("channel closed: %v", reason)
		case delivery, open := <-deliveries:
			if !open {
				return errors.New("deliveries ended")
			}
			// At most prefetchCount deliveries are in flight, so this spawns no more.
			handling.Add(1)
			go func() {
				defer handling.Done()
				c.handle(ctx, topic, delivery, handler)
			}()
		}
	}
}

func (c *Component) handle(ctx context.Context, topic string, delivery amqp.Delivery, handler pubsub.Handler) {
	message := &pubsub.NewMessage{Data: delivery.Body, Topic: topic, Metadata: map[string]string{}}
	if delivery.Redelivered {
		message.Metadata["redelivered"] = strconv.FormatBool(true)
	}
	if err := handler(ctx, message); err != nil {
		c.log.Errorf("agora.rabbitmq: the app did not take a message of %s: %v", topic, err)
		if nackErr := delivery.Nack(false, c.opts.RequeueInFailure); nackErr != nil {
			c.log.Warnf("agora.rabbitmq: nack on %s: %v (the broker puts it back when the channel closes)", topic, nackErr)
		}
		return
	}
	if err := delivery.Ack(false); err != nil {
		c.log.Warnf("agora.rabbitmq: ack on %s: %v (the broker delivers it again)", topic, err)
	}
}

func (c *Component) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		close(c.closeCh)
	}
	c.wg.Wait()
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	c.dropPublisher()
	return nil
}
