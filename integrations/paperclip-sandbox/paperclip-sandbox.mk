# pcsync's Paperclip sandbox-provider plugin (integrations/paperclip-sandbox,
# docs/paperclip.md "Sandbox environments").
#
#   make paperclip-plugin            build it into $(PAPERCLIP_PLUGIN_DIR) and
#                                    print that absolute path as the last line
#   make paperclip-plugin-typecheck  check its JSDoc types (// @ts-check) with
#                                    tsc --noEmit (TypeScript from typecheck/,
#                                    which the plugin does not ship)
#   make paperclip-plugin-test       the type check and its unit tests (node --test)

PAPERCLIP_PLUGIN_DIR ?= $(CURDIR)/_out/paperclip-plugin
export PAPERCLIP_PLUGIN_DIR

.PHONY: paperclip-plugin paperclip-plugin-typecheck paperclip-plugin-test

paperclip-plugin:
	@bash integrations/paperclip-sandbox/build.sh

paperclip-plugin-typecheck: paperclip-plugin
	@cd integrations/paperclip-sandbox/typecheck && PATH="$$(bash ../../../hack/node/install.sh):$$PATH" && \
		sum="$$(sha256sum package-lock.json | cut -d' ' -f1)" && \
		if [ "$$(cat node_modules/.pcsync-lock-sha256 2>/dev/null)" != "$$sum" ]; then \
			npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2 && echo "$$sum" >node_modules/.pcsync-lock-sha256; \
		fi && \
		cd .. && typecheck/node_modules/.bin/tsc -p tsconfig.json

paperclip-plugin-test: paperclip-plugin-typecheck
	@cd integrations/paperclip-sandbox && PATH="$$(bash ../../hack/node/install.sh):$$PATH" && node --test 'test/*.test.mjs'
