//! How one turn's prompt reaches the program: as arguments, on stdin, in the CLI's own
//! protocol, or in a file; and the prompts that cannot reach it at all (too long for one
//! argument, with an adapter that takes no other way), refused before anything is stored.

use std::path::Path;

use super::{fill, Launch};
use crate::adapter::{LongPrompt, PromptVia, MAX_ARG_PROMPT};
use crate::protocol::A2AError;

/// The way one prompt goes to the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptRoute {
    /// As the last arguments (`prompt_args`, or `end_of_options` and the prompt).
    Arg,
    /// Written to stdin, which is then closed (`stdin_prompt_args` tell the program).
    Stdin,
    /// In the CLI's input protocol, written by its wire parser.
    Protocol,
    /// In a file the host writes before the turn and removes after it; `prompt_file_args`
    /// name it.
    File,
    /// Nowhere: too long for one argument, and the adapter takes it no other way.
    Refused,
}

impl Launch {
    /// How `prompt` goes to the program: the configured way, unless it is an argument and
    /// the prompt is longer than one argument can be (then the adapter's `long_prompt`).
    pub fn prompt_route(&self, prompt: &str) -> PromptRoute {
        match self.prompt_via {
            PromptVia::Arg if prompt.len() > MAX_ARG_PROMPT => match self.adapter.long_prompt {
                LongPrompt::Stdin => PromptRoute::Stdin,
                LongPrompt::File => PromptRoute::File,
                LongPrompt::Refuse => PromptRoute::Refused,
            },
            PromptVia::Arg => PromptRoute::Arg,
            PromptVia::Stdin => PromptRoute::Stdin,
            PromptVia::Protocol => PromptRoute::Protocol,
        }
    }

    /// Refuses up front a prompt that cannot reach the program: too long for an argument,
    /// with an adapter that takes no other way.
    pub fn check_prompt(&self, prompt: &str) -> Result<(), A2AError> {
        if self.prompt_route(prompt) != PromptRoute::Refused {
            return Ok(());
        }
        Err(A2AError::InvalidParams(format!(
            "the prompt is {} bytes; the '{}' adapter passes it as a command-line argument, which takes at most {} bytes (128 KiB), and its CLI takes a longer prompt no other way. Send a shorter message, or attach the text as a file",
            prompt.len(),
            self.adapter.id,
            MAX_ARG_PROMPT
        )))
    }

    /// The arguments that carry the prompt, placed last: for [`PromptRoute::Arg`]
    /// `prompt_args` (or `end_of_options` and the prompt), for [`PromptRoute::Stdin`]
    /// `end_of_options` and `stdin_prompt_args` (none when those are empty), for
    /// [`PromptRoute::File`] `prompt_file_args` with `{prompt_file}` the path of
    /// `prompt_file`. `values`: the placeholders of `args`.
    pub(super) fn prompt_arguments(
        &self,
        route: PromptRoute,
        prompt: &str,
        prompt_file: &Path,
        values: &[(&str, &str)],
        args: &mut Vec<String>,
    ) {
        let a = &self.adapter;
        match route {
            PromptRoute::Arg | PromptRoute::Refused => {
                if a.prompt_args.is_empty() {
                    // `--` (or the CLI's own marker): a prompt starting with `-` is not an option.
                    if !a.end_of_options.is_empty() {
                        args.push(a.end_of_options.clone());
                    }
                    args.push(prompt.to_string());
                } else {
                    let mut with_prompt = values.to_vec();
                    with_prompt.push(("prompt", prompt));
                    args.extend(a.prompt_args.iter().map(|p| fill(p, &with_prompt)));
                }
            }
            PromptRoute::Stdin => {
                if !a.stdin_prompt_args.is_empty() {
                    if !a.end_of_options.is_empty() {
                        args.push(a.end_of_options.clone());
                    }
                    args.extend(a.stdin_prompt_args.iter().cloned());
                }
            }
            PromptRoute::File => {
                let path = prompt_file.to_string_lossy();
                let mut with_file = values.to_vec();
                with_file.push(("prompt_file", &path));
                args.extend(a.prompt_file_args.iter().map(|p| fill(p, &with_file)));
            }
            PromptRoute::Protocol => {}
        }
    }
}
