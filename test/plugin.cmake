# kubectl gpuquota: the rendering of `top` and the YAML printer, without a
# cluster (the commands themselves are proven by test/e2e/t_plugin.sh).
gq_unit_test(test_plugin_render unit/cli/test_plugin_render.c LIBS gq_cli)

# `cmake --install` lays out gpuquota and the kubectl-gpuquota symlink that
# kubectl finds on PATH; run under that name it is the plugin.
gq_output_test(plugin_install "installed"
         COMMAND sh -c "rm -rf \"$1\" && cmake --install \"$2\" --prefix \"$1\" >/dev/null &&
                        test \"$(readlink \"$1/bin/kubectl-gpuquota\")\" = gpuquota &&
                        \"$1/bin/kubectl-gpuquota\" --help | grep -q '^usage: kubectl gpuquota COMMAND' &&
                        \"$1/bin/kubectl-gpuquota\" top --help | grep -q 'kubectl gpuquota top' &&
                        echo installed"
                 sh ${CMAKE_BINARY_DIR}/test/plugin-install ${CMAKE_BINARY_DIR})
