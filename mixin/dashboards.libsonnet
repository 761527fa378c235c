{
  grafanaDashboards+:: (import 'dashboards/dashboards.libsonnet')($._config),
}
