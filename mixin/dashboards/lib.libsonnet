// Building blocks for the membloat dashboards: plain jsonnet, no external library. A
// function of the mixin's _config (config.libsonnet).
//
// Queries are written with `SEL` where the job/instance matchers go, so every selector
// filters by the dashboard's variables:  membloat_memory_total_bytes{SEL}.
function(config)
  local ds = { type: 'prometheus', uid: '${datasource}' };
  // `cluster` is the external label a fleet's Prometheus servers add; on a single cluster
  // the series have none, and `.*` (All) matches that.
  local sel = '%s=~"$cluster",job=~"$job",instance=~"$instance"' % config.clusterLabel;
  // The fleet dashboard's matchers: SELN for series of one node (the `node` variable
  // picks nodes by their instance label), SELJ for series recorded per cluster and job.
  local selj = '%s=~"$cluster",job=~"$job"' % config.clusterLabel;
  local seln = selj + ',instance=~"$node"';

  local expand(expr) =
    std.strReplace(std.strReplace(std.strReplace(expr, 'SELN', seln), 'SELJ', selj), 'SEL', sel);

  local target(t, i) = {
    datasource: ds,
    expr: expand(t[0]),
    legendFormat: if std.length(t) > 1 then t[1] else '__auto',
    refId: std.char(65 + i),
  };

  local targets(qs) = std.mapWithIndex(function(i, q) target(q, i), qs);

  local common(title, description, unit, qs) = {
    title: title,
    description: description,
    datasource: ds,
    targets: targets(qs),
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
  };

  {
    // The matchers every query carries, for queries written outside `SEL`.
    sel:: sel,
    selj:: selj,

    // A query variable over a label of series that match `selector`.
    // `all=false` offers no "All" option, so the default is one value (the first), not every
    // host of a fleet at once; several can still be picked.
    labelVar(name, label, selector, all=true, allValue='.+')::
      local q = 'label_values(%s, %s)' % [selector, label];
      {
        name: name,
        label: std.asciiUpper(name[0]) + name[1:],
        type: 'query',
        datasource: ds,
        query: q,
        definition: q,
        multi: true,
        includeAll: all,
        allValue: allValue,
        refresh: 2,
        sort: 1,
        hide: 0,
        current: {},
        options: [],
      },

    // Lines over time. `qs` is a list of [expr, legend] pairs.
    // `thresholds` are [value, colour] steps drawn as dashed lines: the alert thresholds.
    // `hostLink`: each line links to the host dashboard of its node.
    timeseries(title, description, unit, qs, w=12, h=8, stack=false, bars=false, min=null, thresholds=[], hostLink=false)::
      common(title, description, unit, qs) {
        type: 'timeseries',
        w:: w,
        h:: h,
        fieldConfig+: {
          defaults+: {
            custom: {
              drawStyle: if bars then 'bars' else 'line',
              fillOpacity: if stack || bars then 60 else 10,
              lineWidth: 1,
              showPoints: 'never',
              stacking: { mode: if stack then 'normal' else 'none', group: 'A' },
              thresholdsStyle: { mode: if thresholds == [] then 'off' else 'dashed' },
            },
            [if min != null then 'min']: min,
            [if hostLink then 'links']: [$.hostLink('${__field.labels.instance}')],
            thresholds: {
              mode: 'absolute',
              steps: [{ color: 'green', value: null }] + [{ value: t[0], color: t[1] } for t in thresholds],
            },
          },
        },
        options: {
          legend: { displayMode: 'table', placement: 'bottom', calcs: ['lastNotNull', 'max'] },
          tooltip: { mode: 'multi', sort: 'desc' },
        },
      },

    // One number (the latest value). `steps` are [value, colour] threshold steps after the
    // base colour; `mappings` turn values into words.
    stat(title, description, unit, qs, w=4, h=4, base='green', steps=[], mappings=[])::
      common(title, description, unit, qs) {
        type: 'stat',
        w:: w,
        h:: h,
        fieldConfig+: {
          defaults+: {
            thresholds: {
              mode: 'absolute',
              steps: [{ color: base, value: null }] + [{ value: s[0], color: s[1] } for s in steps],
            },
            mappings: mappings,
          },
        },
        options: {
          reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
          colorMode: 'value',
          graphMode: 'area',
          textMode: 'auto',
          justifyMode: 'auto',
          orientation: 'auto',
        },
      },

    // Latest values as a table: one row per series, one column per query, joined on labels.
    // `overrides` are [column, unit] pairs for columns that differ from `unit`.
    // `hostLink`: the instance column links to that node's host dashboard.
    // `desc`: rows by the first query's value, largest first (false: smallest first).
    table(title, description, unit, qs, w=24, h=8, overrides=[], hostLink=false, desc=true)::
      common(title, description, unit, qs) {
        type: 'table',
        w:: w,
        h:: h,
        targets: [t { format: 'table', instant: true, range: false } for t in super.targets],
        fieldConfig+: {
          overrides: [
            {
              matcher: { id: 'byName', options: o[0] },
              properties: [{ id: 'unit', value: o[1] }],
            }
            for o in overrides
          ] + (if hostLink then [{
                 matcher: { id: 'byName', options: 'instance' },
                 properties: [{ id: 'links', value: [$.hostLink('${__value.raw}')] }],
               }] else []),
        },
        transformations: [
          { id: 'merge', options: {} },
          { id: 'organize', options: { excludeByName: { Time: true, __name__: true, job: true } } },
        ],
        options: { showHeader: true, sortBy: [{ displayName: 'Value #A', desc: desc }] },
      },

    // A link to the host dashboard of the node `instance` names (a Grafana expression),
    // keeping the cluster, job and time range.
    hostLink(instance):: {
      title: 'Host memory and OOM risk of ' + instance,
      url: '/d/membloat-host/membloat-host?${cluster:queryparam}&${job:queryparam}&var-instance=%s&${__url_time_range}' % instance,
    },

    // Value mappings for 0/1 gauges and enumerations.
    valueText(pairs):: [{
      type: 'value',
      options: {
        [std.toString(pairs[i][0])]: { text: pairs[i][1], color: pairs[i][2], index: i }
        for i in std.range(0, std.length(pairs) - 1)
      },
    }],

    // A collapsed row holds the panels up to the next row (Grafana's layout for it).
    row(title, collapsed=false):: { type: 'row', title: title, collapsed: collapsed, panels: [], w:: 24, h:: 1 },

    // Places panels left to right, wrapping at the 24-column grid, and numbers them.
    layout(panels)::
      local place(acc, p) =
        local wrap = acc.x + p.w > 24 || p.type == 'row';
        local x = if wrap then 0 else acc.x;
        local y = if wrap then acc.y + acc.rowh else acc.y;
        {
          x: x + p.w,
          y: y,
          rowh: if wrap then p.h else std.max(acc.rowh, p.h),
          out: acc.out + [p { id: std.length(acc.out) + 1, gridPos: { x: x, y: y, w: p.w, h: p.h } }],
        };
      local placed = std.foldl(place, panels, { x: 0, y: 0, rowh: 0, out: [] }).out;
      // Panels after a collapsed row move into it.
      local nest(acc, p) =
        if p.type == 'row' then acc + [p]
        else if std.length(acc) > 0 && acc[std.length(acc) - 1].type == 'row'
                && acc[std.length(acc) - 1].collapsed then
          acc[:std.length(acc) - 1] + [acc[std.length(acc) - 1] { panels+: [p] }]
        else acc + [p];
      std.foldl(nest, placed, []),

    // `fleet`: the fleet's variables (cluster, job, node, with "All" nodes by default)
    // instead of one host's (cluster, job, instance).
    dashboard(uid, title, description, panels, extraVars=[], fleet=false):: {
      uid: uid,
      title: title,
      description: description,
      tags: config.dashboardTags,
      editable: true,
      graphTooltip: 1,
      schemaVersion: 39,
      version: 1,
      refresh: config.dashboardRefresh,
      time: { from: 'now-6h', to: 'now' },
      timezone: '',
      // OOM kills on the time axis of every panel.
      annotations: {
        list: [{
          name: 'OOM kills',
          datasource: ds,
          enable: true,
          hide: false,
          iconColor: 'red',
          expr: expand('increase(membloat_vmstat_oom_kill_total{%s}[$__rate_interval]) > 0' % (if fleet then 'SELN' else 'SEL')),
          step: '60s',
          titleFormat: 'OOM kill',
          textFormat: '{{instance}}: the OOM killer killed a process',
          useValueForTime: false,
        }],
      },
      links: [{ type: 'dashboards', tags: config.dashboardTags, asDropdown: true, title: 'membloat dashboards', includeVars: true, keepTime: true }],
      templating: {
        list: [
          {
            name: 'datasource',
            label: 'Data source',
            type: 'datasource',
            query: 'prometheus',
            regex: '',
            hide: 0,
            refresh: 1,
            current: {},
            options: [],
          },
          $.labelVar('cluster', config.clusterLabel, 'membloat_build_info', allValue='.*'),
          $.labelVar('job', 'job', 'membloat_build_info{%s=~"$cluster"}' % config.clusterLabel),
        ] + (
          if fleet then [$.labelVar('node', 'instance', 'membloat_build_info{%s}' % selj)]
          else [$.labelVar('instance', 'instance', 'membloat_build_info{%s=~"$cluster",job=~"$job"}' % config.clusterLabel, all=false)]
        ) + extraVars,
      },
      panels: $.layout(panels),
    },
  }
