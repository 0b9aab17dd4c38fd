# deploy/monitoring: the dashboard and the rules are well formed and every
# query parses (test/e2e/t_monitoring.sh checks them against live /metrics).
gq_output_test(monitoring_syntax "monitoring: ok"
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/monitoring_check.py
          ${CMAKE_SOURCE_DIR}/deploy/monitoring/grafana-dashboard.json
          ${CMAKE_SOURCE_DIR}/deploy/monitoring/alerts.yaml)

# An alert that needs more than its syntax checked is evaluated on made-up
# series, as promtool's rule unit tests would (GPUQuotaStarvedByReclaim).
gq_output_test(alert_rules "alert rules: ok"
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/alert_rules_check.py
          ${CMAKE_SOURCE_DIR}/deploy/monitoring/alerts.yaml)
