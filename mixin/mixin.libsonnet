// The membloat_exporter monitoring mixin: alerts, recording rules and dashboards, set up
// by _config (config.libsonnet). The plain files in deploy/prometheus/ and grafana/ are
// this mixin rendered with the defaults (mixin/render.sh; a test keeps them current).
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'rules.libsonnet') +
(import 'dashboards.libsonnet')
