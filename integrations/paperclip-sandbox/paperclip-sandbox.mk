# pcsync's Paperclip sandbox-provider plugin (integrations/paperclip-sandbox,
# docs/paperclip.md "Sandbox environments").
#
#   make paperclip-plugin        build it into $(PAPERCLIP_PLUGIN_DIR) and
#                                print that absolute path as the last line
#   make paperclip-plugin-test   its unit tests (node --test)

PAPERCLIP_PLUGIN_DIR ?= $(CURDIR)/_out/paperclip-plugin
export PAPERCLIP_PLUGIN_DIR

.PHONY: paperclip-plugin paperclip-plugin-test

paperclip-plugin:
	@bash integrations/paperclip-sandbox/build.sh

paperclip-plugin-test: paperclip-plugin
	@cd integrations/paperclip-sandbox && PATH="$$(bash ../../hack/node/install.sh):$$PATH" node --test 'test/*.test.mjs'
