{{/* vim: set filetype=mustache: */}}
{{/*
The chart's name ("agora", or nameOverride).
*/}}
{{- define "agora.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Prefix of every object's name: fullnameOverride, else "<release>-<name>" (just the release
name when it already contains the chart's name). Kept to 40 characters, so that with a
service's name after it ("-uncertainty") it stays a valid DNS label.
*/}}
{{- define "agora.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Name of one part's objects: "<fullname>-<part>". Call with (dict "root" $ "part" "registry").
*/}}
{{- define "agora.partName" -}}
{{- printf "%s-%s" (include "agora.fullname" .root) .part | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The chart label.
*/}}
{{- define "agora.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels every object carries.
*/}}
{{- define "agora.labels" -}}
helm.sh/chart: {{ include "agora.chart" . }}
app.kubernetes.io/name: {{ include "agora.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agora
{{- end -}}

{{/*
Labels of one part (a service, the console, jaeger): the common labels plus its component.
Call with (dict "root" $ "part" "registry").
*/}}
{{- define "agora.partLabels" -}}
{{ include "agora.labels" .root }}
app.kubernetes.io/component: {{ .part }}
{{- end -}}

{{/*
Selector labels of one part. Call with (dict "root" $ "part" "registry").
*/}}
{{- define "agora.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agora.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .part }}
{{- end -}}

{{/*
The Agora image.
*/}}
{{- define "agora.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The services, in start order (the local harness's), with what the chart needs to know of each:
its module (`python -m <module>`) and whether it calls a model (it gets the model backend's
settings, and the conversation component is scoped to it). App id = the service's name.
*/}}
{{- define "agora.serviceNames" -}}
registry taskboard reputation allocator worker escalation uncertainty planner debate
{{- end -}}

{{- define "agora.modelUsers" -}}
allocator worker uncertainty planner debate
{{- end -}}

{{/*
Names an agent app may not take: the services' and the console's app ids, the chart's other
parts (jaeger) and the local topic recorder.
*/}}
{{- define "agora.reservedAppIds" -}}
registry taskboard reputation allocator worker escalation uncertainty planner debate console jaeger recorder
{{- end -}}

{{/*
The agent apps (values agentApps), each entry merged over agentAppDefaults and checked: a
valid, unique app id that no service has, and exactly one way to start it (agentsFile, module
or command; or a2aAgents, which the SDK's agent app serves, alone or beside an agentsFile). Renders {"apps": [...]} as JSON; read it with
(include "agora.agentApps" . | fromJson).apps.
*/}}
{{- define "agora.agentApps" -}}
{{- $reserved := splitList " " (include "agora.reservedAppIds" .) -}}
{{- $apps := list -}}
{{- $seen := dict -}}
{{- range $i, $entry := .Values.agentApps -}}
{{- $app := mergeOverwrite (deepCopy $.Values.agentAppDefaults) (deepCopy $entry) -}}
{{- $name := required (printf "agentApps[%d].name is required (the agent app's Dapr app id)" $i) $app.name -}}
{{- if has $name $reserved -}}
{{- fail (printf "agentApps[%d].name: %q is the app id of one of the chart's own parts; pick another" $i $name) -}}
{{- end -}}
{{- if hasKey $seen $name -}}
{{- fail (printf "agentApps[%d].name: %q is given to two agent apps; app ids are unique" $i $name) -}}
{{- end -}}
{{- $_ := set $seen $name true -}}
{{- $starts := 0 -}}
{{- range $way := list "agentsFile" "module" "command" -}}
{{- if index $app $way }}{{ $starts = add1 $starts }}{{ end -}}
{{- end -}}
{{- if $app.a2aAgents -}}
{{- if or $app.module $app.command -}}
{{- fail (printf "agentApps[%d] (%s): a2aAgents are served by the SDK's agent app: not with module or command" $i $name) -}}
{{- end -}}
{{- else if ne (int $starts) 1 -}}
{{- fail (printf "agentApps[%d] (%s): give exactly one of agentsFile, module or command (or a2aAgents)" $i $name) -}}
{{- end -}}
{{- $apps = append $apps $app -}}
{{- end -}}
{{- dict "apps" $apps | toJson -}}
{{- end -}}

{{/*
The agent apps' app ids, space-separated ("" when none).
*/}}
{{- define "agora.agentAppIds" -}}
{{- $ids := list -}}
{{- range (include "agora.agentApps" . | fromJson).apps -}}
{{- $ids = append $ids .name -}}
{{- end -}}
{{- join " " $ids -}}
{{- end -}}

{{/*
Topic scopes of agora-pubsub (components/redis/pubsub.yaml, without the local topic recorder),
with each agent app's: publish agora.task.outcome, agora.cost.events, agora.tasks, agora.plans and
agora.debates (its graphs' market, planning and debate nodes) and agora.deadletter; subscribe agora.task.awarded, agora.task.cancelled (a person stopping a run), agora.escalation.resolved (a
person's decision on a paused run) and how what its graphs wait for ends (agora.task.outcome.recorded,
agora.task.rejected, agora.task.award_lapsed, agora.plan.completed, agora.debate.completed). The local profile's agent apps `agents` and `agents-go` keep their entries; an agent app
of the same name takes its entry over.
Call with (dict "root" $ "rule" "publishingScopes"|"subscriptionScopes").
*/}}
{{- define "agora.pubsubTopicScopes" -}}
{{- $ids := splitList " " (include "agora.agentAppIds" .root) | compact -}}
{{- $entries := list -}}
{{- if eq .rule "publishingScopes" -}}
{{- $entries = list "console=agora.registry,agora.tasks,agora.plans,agora.debates" "registry=agora.registry,agora.deadletter" "taskboard=agora.tasks,agora.task.awarded,agora.task.rejected,agora.task.award_lapsed,agora.task.cancelled,agora.agent.run_freed,agora.task.outcome.recorded,agora.deadletter" "worker=agora.registry,agora.task.outcome,agora.cost.events,agora.deadletter" "escalation=agora.escalation.resolved,agora.deadletter" "uncertainty=agora.escalation.outcome,agora.deadletter" "planner=agora.tasks,agora.plan.completed,agora.deadletter" "debate=agora.debate.completed,agora.deadletter" -}}
{{- if not (has "agents" $ids) }}{{ $entries = append $entries "agents=agora.task.outcome,agora.cost.events,agora.tasks,agora.plans,agora.debates,agora.deadletter" }}{{ end -}}
{{- if not (has "agents-go" $ids) }}{{ $entries = append $entries "agents-go=agora.task.outcome,agora.deadletter" }}{{ end -}}
{{- range $ids }}{{ $entries = append $entries (printf "%s=agora.task.outcome,agora.cost.events,agora.tasks,agora.plans,agora.debates,agora.deadletter" .) }}{{ end -}}
{{- else -}}
{{- $entries = list "allocator=agora.tasks,agora.task.outcome,agora.task.outcome.recorded" "taskboard=agora.escalation.resolved,agora.agent.run_freed" "registry=agora.registry,agora.task.award_lapsed" "worker=agora.task.awarded,agora.escalation.resolved" "uncertainty=agora.escalation.resolved" "escalation=agora.escalation.outcome" "planner=agora.plans,agora.task.outcome.recorded,agora.task.rejected,agora.task.award_lapsed,agora.escalation.resolved" "debate=agora.debates,agora.escalation.resolved" -}}
{{- if not (has "agents" $ids) }}{{ $entries = append $entries "agents=agora.task.awarded,agora.task.cancelled,agora.escalation.resolved,agora.task.outcome.recorded,agora.task.rejected,agora.task.award_lapsed,agora.plan.completed,agora.debate.completed" }}{{ end -}}
{{- if not (has "agents-go" $ids) }}{{ $entries = append $entries "agents-go=agora.task.awarded" }}{{ end -}}
{{- range $ids }}{{ $entries = append $entries (printf "%s=agora.task.awarded,agora.task.cancelled,agora.escalation.resolved,agora.task.outcome.recorded,agora.task.rejected,agora.task.award_lapsed,agora.plan.completed,agora.debate.completed" .) }}{{ end -}}
{{- end -}}
{{- join ";" $entries -}}
{{- end -}}

{{/*
Who may call each app's API (service invocation), per components/access-control/<app>.yaml:
deny by default, console allowed everything, the few callers the architecture needs allowed
what they need. Rendered into each app's Configuration with the trust domain and namespace.
*/}}
{{- define "agora.accessPolicies" -}}
registry:
  - appId: console
    defaultAction: allow
  - appId: registry
    defaultAction: allow
  - appId: worker
    defaultAction: deny
    operations:
      - name: /v1/agents
        httpVerb: ["POST"]
        action: allow
  - appId: agents
    defaultAction: deny
    operations:
      - name: /v1/agents
        httpVerb: ["POST"]
        action: allow
  - appId: agents-go
    defaultAction: deny
    operations:
      - name: /v1/agents
        httpVerb: ["POST"]
        action: allow
{{- range splitList " " (include "agora.agentAppIds" .) | compact }}
{{- if not (has . (list "agents" "agents-go")) }}
  - appId: {{ . }}
    defaultAction: deny
    operations:
      - name: /v1/agents
        httpVerb: ["POST"]
        action: allow
{{- end }}
{{- end }}
  - appId: allocator
    defaultAction: deny
    operations:
      - name: /v1/agents/filter
        httpVerb: ["POST"]
        action: allow
      - name: /v1/agents/*
        httpVerb: ["GET"]
        action: allow
taskboard:
  - appId: console
    defaultAction: allow
  - appId: allocator
    defaultAction: deny
    operations:
      - name: /v1/tasks
        httpVerb: ["GET"]
        action: allow
  - appId: agents
    defaultAction: deny
    operations:
      - name: /v1/tasks/**/dispute
        httpVerb: ["POST"]
        action: allow
{{- range splitList " " (include "agora.agentAppIds" .) | compact }}
{{- if ne . "agents" }}
  - appId: {{ . }}
    defaultAction: deny
    operations:
      - name: /v1/tasks/**/dispute
        httpVerb: ["POST"]
        action: allow
{{- end }}
{{- end }}
reputation:
  - appId: console
    defaultAction: allow
allocator:
  - appId: console
    defaultAction: allow
worker:
  - appId: console
    defaultAction: allow
  - appId: allocator
    defaultAction: deny
    operations:
      - name: /v1/bids
        httpVerb: ["POST"]
        action: allow
escalation:
  - appId: console
    defaultAction: allow
  - appId: uncertainty
    defaultAction: deny
    operations:
      - name: /v1/escalations/*
        httpVerb: ["GET", "PUT"]
        action: allow
  - appId: worker
    defaultAction: deny
    operations:
      - name: /v1/escalations/*
        httpVerb: ["GET", "PUT"]
        action: allow
uncertainty:
  - appId: console
    defaultAction: allow
  - appId: worker
    defaultAction: deny
    operations:
      # First: Dapr matches a path segment against the rules in the order they are listed,
      # and a `/**` rule listed earlier would take the single-segment path for itself.
      - name: /v1/sessions/*
        httpVerb: ["GET"]
        action: allow
      - name: /v1/sessions/**/llm-responses
        httpVerb: ["POST"]
        action: allow
      - name: /v1/sessions/**/tool-calls
        httpVerb: ["POST"]
        action: allow
      - name: /v1/sessions/**/checkpoints
        httpVerb: ["POST"]
        action: allow
  - appId: agents
    defaultAction: deny
    operations:
      - name: /v1/sessions/*
        httpVerb: ["GET"]
        action: allow
      - name: /v1/sessions/**/llm-responses
        httpVerb: ["POST"]
        action: allow
      - name: /v1/sessions/**/tool-calls
        httpVerb: ["POST"]
        action: allow
      - name: /v1/sessions/**/checkpoints
        httpVerb: ["POST"]
        action: allow
{{- range splitList " " (include "agora.agentAppIds" .) | compact }}
{{- if not (has . (list "agents" "agents-go")) }}
  - appId: {{ . }}
    defaultAction: deny
    operations:
      - name: /v1/sessions/*
        httpVerb: ["GET"]
        action: allow
      - name: /v1/sessions/**/llm-responses
        httpVerb: ["POST"]
        action: allow
      - name: /v1/sessions/**/tool-calls
        httpVerb: ["POST"]
        action: allow
      - name: /v1/sessions/**/checkpoints
        httpVerb: ["POST"]
        action: allow
{{- end }}
{{- end }}
planner:
  - appId: console
    defaultAction: allow
{{- range splitList " " (include "agora.agentAppIds" .) | compact | concat (list "agents") | uniq }}
  - appId: {{ . }}
    defaultAction: deny
    operations:
      - name: /v1/plans/*
        httpVerb: ["GET"]
        action: allow
{{- end }}
debate:
  - appId: console
    defaultAction: allow
{{- range splitList " " (include "agora.agentAppIds" .) | compact | concat (list "agents") | uniq }}
  - appId: {{ . }}
    defaultAction: deny
    operations:
      - name: /v1/debates/*
        httpVerb: ["GET"]
        action: allow
{{- end }}
console: []
{{- /* Agent apps (components/access-control/agents.yaml): the allocator asks their agents for
bids; the console may call them. Like the worker, each may report its runs' steps to the
uncertainty monitor (its policy above). */}}
{{- range splitList " " (include "agora.agentAppIds" .) | compact }}
{{ . }}:
  - appId: allocator
    defaultAction: deny
    operations:
      - name: /v1/bids
        httpVerb: ["POST"]
        action: allow
  - appId: console
    defaultAction: allow
{{- end }}
{{- end -}}

{{/*
The model backend's settings (AGORA_MODEL_*), for an app that calls a model; the API key comes
from its Secret.
*/}}
{{- define "agora.modelEnv" -}}
- name: AGORA_MODEL_BACKEND
  value: {{ $.Values.model.backend | quote }}
{{- with $.Values.model.name }}
- name: AGORA_MODEL_MODEL
  value: {{ . | quote }}
{{- end }}
- name: AGORA_MODEL_TIMEOUT_S
  value: {{ $.Values.model.timeoutSeconds | quote }}
{{- if eq $.Values.model.backend "openai" }}
- name: AGORA_MODEL_OPENAI_BASE_URL
  value: {{ required "model.openai.baseUrl is required with model.backend openai" $.Values.model.openai.baseUrl | quote }}
- name: AGORA_MODEL_OPENAI_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ required "model.openai.existingSecret is required with model.backend openai" $.Values.model.openai.existingSecret | quote }}
      key: {{ $.Values.model.openai.apiKeyKey | quote }}
{{- end }}
{{- end -}}

{{/*
host:port of the OTLP collector every span goes to ("" when none): the in-chart Jaeger's
receiver for tracing.protocol, else tracing.otlpEndpoint.
*/}}
{{- define "agora.otlpEndpoint" -}}
{{- if .Values.tracing.enabled -}}
{{- if .Values.jaeger.enabled -}}
{{- printf "%s.%s.svc:%s" (include "agora.partName" (dict "root" . "part" "jaeger")) .Release.Namespace (ternary "4318" "4317" (eq .Values.tracing.protocol "http")) -}}
{{- else -}}
{{- .Values.tracing.otlpEndpoint -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The Dapr annotations every Agora pod (service or console) carries. Call with
(dict "root" $ "app" "registry" "sidecar" <sidecar resources> "appPort" true|false
"maxConcurrency" <int or nil>).
*/}}
{{- define "agora.daprAnnotations" -}}
{{- $root := .root -}}
dapr.io/enabled: "true"
dapr.io/app-id: {{ .app | quote }}
{{- if .appPort }}
dapr.io/app-port: {{ $root.Values.app.port | quote }}
dapr.io/app-protocol: "http"
dapr.io/app-channel-address: "127.0.0.1"
{{- if $root.Values.dapr.appHealthCheck.enabled }}
dapr.io/enable-app-health-check: "true"
dapr.io/app-health-check-path: "/healthz"
dapr.io/app-health-probe-interval: {{ $root.Values.dapr.appHealthCheck.probeIntervalSeconds | quote }}
dapr.io/app-health-probe-timeout: {{ $root.Values.dapr.appHealthCheck.probeTimeoutMilliseconds | quote }}
dapr.io/app-health-threshold: {{ $root.Values.dapr.appHealthCheck.threshold | quote }}
{{- end }}
{{- if not (kindIs "invalid" .maxConcurrency) }}
dapr.io/app-max-concurrency: {{ .maxConcurrency | quote }}
{{- end }}
{{- end }}
dapr.io/config: {{ include "agora.partName" (dict "root" $root "part" .app) | quote }}
dapr.io/log-level: {{ $root.Values.dapr.logLevel | quote }}
dapr.io/log-as-json: {{ $root.Values.dapr.logAsJson | quote }}
dapr.io/enable-api-logging: {{ $root.Values.dapr.enableApiLogging | quote }}
dapr.io/enable-metrics: {{ $root.Values.dapr.enableMetrics | quote }}
dapr.io/max-body-size: {{ $root.Values.dapr.maxBodySize | quote }}
dapr.io/graceful-shutdown-seconds: {{ $root.Values.dapr.gracefulShutdownSeconds | quote }}
dapr.io/sidecar-cpu-request: {{ .sidecar.cpuRequest | quote }}
dapr.io/sidecar-cpu-limit: {{ .sidecar.cpuLimit | quote }}
dapr.io/sidecar-memory-request: {{ .sidecar.memoryRequest | quote }}
dapr.io/sidecar-memory-limit: {{ .sidecar.memoryLimit | quote }}
dapr.io/sidecar-seccomp-profile-type: "RuntimeDefault"
{{- /* Component credentials are resolved by Dapr's operator (auth.secretStore: kubernetes),
not by the sidecar, and no app may read secrets: the sidecar needs no Kubernetes API access
of its own, so its built-in kubernetes secret store (which would need the pod's service
account token) is off. */}}
dapr.io/disable-builtin-k8s-secret-store: "true"
{{- end -}}

{{/*
Pod-level security context of every pod this chart runs.
*/}}
{{- define "agora.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
Container-level security context of every container this chart runs.
*/}}
{{- define "agora.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
An in-container probe of one of the app's routes (the app listens on 127.0.0.1, which the
kubelet's HTTP probes cannot reach). Exits non-zero unless the route answers 2xx. bash's own
/dev/tcp speaks the HTTP/1.0 request: a probe costs about 2 ms of CPU, where starting Python for
it cost about 70 ms (ten pods probed every few seconds kept a fifth of a core busy when idle).
Call with (dict "root" $ "path" "/healthz" "probe" <probe values>).
*/}}
{{- define "agora.probe" -}}
exec:
  command:
    - bash
    - -c
    - {{ printf "exec 3<>/dev/tcp/127.0.0.1/%v && printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && IFS= read -r -t %v status <&3 && [[ $status == HTTP/1.?' 2'* ]]" (toString .root.Values.app.port) .path (sub .probe.timeoutSeconds 1 | max 1) | quote }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/*
Checks a Component's secretMetadata has a Secret to read from, and renders it as secretKeyRef
items. Call with (dict "component" "agora-state" "values" .Values.stateStore).
*/}}
{{- define "agora.secretMetadata" -}}
{{- $secret := .values.existingSecret -}}
{{- if and .values.secretMetadata (not $secret) -}}
{{- fail (printf "%s: secretMetadata is set but existingSecret is empty; name the Secret its keys are read from" .component) -}}
{{- end -}}
{{- range .values.secretMetadata }}
- name: {{ .name | quote }}
  secretKeyRef:
    name: {{ $secret | quote }}
    key: {{ .key | quote }}
{{- end -}}
{{- end -}}

{{/*
Plain metadata items of a Component. Call with the list.
*/}}
{{- define "agora.plainMetadata" -}}
{{- range . }}
- name: {{ .name | quote }}
  value: {{ .value | toString | quote }}
{{- end -}}
{{- end -}}

{{/*
The Redis connection of a Redis-backed Component (state.redis, pubsub.redis).
*/}}
{{- define "agora.redisMetadata" -}}
- name: redisHost
  value: {{ .Values.redis.host | quote }}
{{- with .Values.redis.username }}
- name: redisUsername
  value: {{ . | quote }}
{{- end }}
{{- if .Values.redis.auth.enabled }}
- name: redisPassword
  secretKeyRef:
    name: {{ .Values.redis.auth.existingSecret | quote }}
    key: {{ .Values.redis.auth.passwordKey | quote }}
{{- end }}
- name: enableTLS
  value: {{ .Values.redis.enableTLS | quote }}
{{- end -}}

{{/*
An agent app's A2A agents as AGORA_A2A_AGENTS reads them: name=cardUrl, comma-separated.
*/}}
{{- define "agora.a2aAgents" -}}
{{- $entries := list -}}
{{- range . -}}
{{- $entries = append $entries (printf "%s=%s" .name .cardUrl) -}}
{{- end -}}
{{- join "," $entries -}}
{{- end -}}
