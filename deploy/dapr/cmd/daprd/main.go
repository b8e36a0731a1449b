// daprd with the components Agora's profiles, its chart and its tests name, and no others.
//
// Dapr's release build registers every stable component (`-tags stablecomponents`): the cloud
// vendors' SDKs are most of what it compiles. This build registers its components here instead;
// the Makefile hides Dapr's guard file (`zz_notag.go`, which refuses a build with no component
// tag) through `go build -overlay`. A component type not listed here is refused by daprd as
// unknown: a cluster that needs others runs Dapr's own released images.
//
// Three of these are outside Dapr's stable set:
//
//   - the SQLite name resolver: local systems resolve app ids through a SQLite file in their
//     own run folder instead of machine-wide mDNS, so two systems started side by side on one
//     machine (`make run` and `make test`, or two test sessions) never reach each other's apps;
//   - the OpenAI conversation component (`conversation.openai`, with an `endpoint` for any
//     OpenAI-compatible server): the Dapr Conversation path to a real model, the local model
//     server of `make run MODEL=local` or a vendor;
//   - Agora's RabbitMQ pub/sub (`pubsub.agora.rabbitmq`, deploy/dapr/rabbitmq), in which every
//     subscription owns its channel: the postgres profile's broker. Dapr's `pubsub.rabbitmq`
//     stays registered.
package main

import (
	"github.com/dapr/components-contrib/conversation/echo"
	"github.com/dapr/components-contrib/conversation/openai"
	nrkubernetes "github.com/dapr/components-contrib/nameresolution/kubernetes"
	"github.com/dapr/components-contrib/nameresolution/mdns"
	"github.com/dapr/components-contrib/nameresolution/sqlite"
	pubsubmemory "github.com/dapr/components-contrib/pubsub/in-memory"
	"github.com/dapr/components-contrib/pubsub/rabbitmq"
	pubsubredis "github.com/dapr/components-contrib/pubsub/redis"
	secretskubernetes "github.com/dapr/components-contrib/secretstores/kubernetes"
	"github.com/dapr/components-contrib/secretstores/local/file"
	statememory "github.com/dapr/components-contrib/state/in-memory"
	postgresql "github.com/dapr/components-contrib/state/postgresql/v2"
	stateredis "github.com/dapr/components-contrib/state/redis"
	"github.com/dapr/dapr/cmd/daprd/app"
	"github.com/dapr/dapr/pkg/components"
	"github.com/dapr/dapr/pkg/components/conversation"
	"github.com/dapr/dapr/pkg/components/nameresolution"
	"github.com/dapr/dapr/pkg/components/pubsub"
	"github.com/dapr/dapr/pkg/components/secretstores"
	"github.com/dapr/dapr/pkg/components/state"

	agorarabbitmq "agora.dev/deploy/dapr/rabbitmq"
)

func init() {
	// The three profiles' stores and brokers (components/default, redis, postgres) and the chart's.
	state.DefaultRegistry.RegisterComponent(statememory.NewInMemoryStateStore, "in-memory")
	state.DefaultRegistry.RegisterComponent(stateredis.NewRedisStateStore, "redis")
	// Only PostgreSQL's v2 table layout: the postgres profile names `version: v2`.
	state.DefaultRegistry.RegisterComponentWithVersions("postgresql", components.Versioning{
		Preferred: components.VersionConstructor{Version: "v2", Constructor: postgresql.NewPostgreSQLStateStore},
		Default:   "v2",
	})
	pubsub.DefaultRegistry.RegisterComponent(pubsubmemory.New, "in-memory")
	pubsub.DefaultRegistry.RegisterComponent(pubsubredis.NewRedisStreams, "redis")
	pubsub.DefaultRegistry.RegisterComponent(rabbitmq.NewRabbitMQ, "rabbitmq")
	pubsub.DefaultRegistry.RegisterComponent(agorarabbitmq.New, "agora.rabbitmq")

	secretstores.DefaultRegistry.RegisterComponent(file.NewLocalSecretStore, "local.file")
	secretstores.DefaultRegistry.RegisterComponent(secretskubernetes.NewKubernetesSecretStore, "kubernetes")

	// sqlite for local systems, mdns for the Dapr CLI's `dapr run -f`, kubernetes on a node.
	nameresolution.DefaultRegistry.RegisterComponent(sqlite.NewResolver, "sqlite")
	nameresolution.DefaultRegistry.RegisterComponent(mdns.NewResolver, "mdns")
	nameresolution.DefaultRegistry.RegisterComponent(nrkubernetes.NewResolver, "kubernetes")

	conversation.DefaultRegistry.RegisterComponent(echo.NewEcho, "echo")
	conversation.DefaultRegistry.RegisterComponent(openai.NewOpenAI, "openai")
}

func main() {
	app.Run()
}
