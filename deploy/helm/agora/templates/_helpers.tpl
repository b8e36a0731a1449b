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
  - appId: allocator
    defaultAction: deny
    operations:
      - name: /v1/agents/filter
        httpVerb: ["POST"]
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
reputation:
  - appId: console
    defaultAction: allow
allocator:
  - appId: console
    defaultAction: allow
worker:
  - appId: console
    defaultAction: allow
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
planner:
  - appId: console
    defaultAction: allow
debate:
  - appId: console
    defaultAction: allow
console: []
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
kubelet's HTTP probes cannot reach). Exits non-zero unless the route answers 2xx.
Call with (dict "root" $ "path" "/healthz" "probe" <probe values>).
*/}}
{{- define "agora.probe" -}}
exec:
  command:
    - python
    - -c
    - {{ printf "import urllib.request; urllib.request.urlopen('http://127.0.0.1:%v%s', timeout=%v)" .root.Values.app.port .path (sub .probe.timeoutSeconds 1 | max 1) | quote }}
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
