# deploy/monitoring: the dashboard and the rules are well formed and every
# query parses (test/e2e/t_monitoring.sh checks them against live /metrics).
add_test(NAME monitoring_syntax
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/monitoring_check.py
                 ${CMAKE_SOURCE_DIR}/deploy/monitoring/grafana-dashboard.json
                 ${CMAKE_SOURCE_DIR}/deploy/monitoring/alerts.yaml)
set_tests_properties(monitoring_syntax PROPERTIES PASS_REGULAR_EXPRESSION "monitoring: ok")
