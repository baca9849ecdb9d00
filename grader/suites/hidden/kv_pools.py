"""kvmemory's option pools: what a paper's student is shown in place of the stub's options (grader/suites/bank.py
``Pooled``). Hidden, as the rest of the bank; the right and the wrong statements share their words, so that neither
the lesson's key nor the longest option points at a right one, and no feedback names a letter."""

from __future__ import annotations

from grader.suites.bank import Option, Pooled


def _options(*pairs: tuple[str, str]) -> tuple[Option, ...]:
    return tuple(Option(text, feedback) for text, feedback in pairs)


POOLS: list[Pooled] = [
    Pooled(
        "Q_MC1",
        right=_options(
            (
                "a key and a value for each head, head_size numbers each",
                "each new token compares its query with the past keys and mixes the past values",
            ),
            (
                "the K, V vectors that later queries read",
                "a later token's query is scored against the keys, and the values are mixed",
            ),
            (
                "its key vector and its value vector: what later tokens score and mix",
                "keys are scored against each new query, values are mixed by those scores",
            ),
        ),
        wrong=_options(
            (
                "a query and a key for each head, of head_size numbers each",
                "the query is used once, by its own token; later tokens read the keys and the values",
            ),
            (
                "query, key and value of each head, kept for reuse",
                "a past token's query is never used again: caching it only costs memory",
            ),
            (
                "the attention weights of its row, over all of the tokens that came before it",
                "the attention weights are recomputed for each new query; keys and values are reused",
            ),
            (
                "its output after attention, to be fed again to the next layer",
                "each layer's output is computed once for the token; the cache keeps what later queries read",
            ),
            (
                "a query for each head, which later tokens compare with",
                "later tokens compare their own query with the past keys: the past query is never read",
            ),
        ),
    ),
    Pooled(
        "Q_MC2",
        several=True,
        why="one token's cache is 2 x n_layers x K/V heads x head_size x bytes per number: only those shrink it; "
        "the batch, the context and the prompt change how many tokens are cached, not what one costs",
        right=_options(
            (
                "caching int8 numbers where bfloat16 ones were cached",
                "one byte per number in place of two halves every token's cache",
            ),
            (
                "grouped-query attention with 8 K/V groups for 32 query heads",
                "8 K/V heads are cached in place of 32: a quarter of the cache",
            ),
            (
                "a model with fewer layers, each of which has its own cache",
                "every layer caches its own keys and values: fewer layers, less per token",
            ),
            (
                "multi-query attention: one K/V head shared by every query head",
                "one K/V head is cached in place of one per head",
            ),
            (
                "a smaller head_size, with the same number of heads as before",
                "each K/V head caches head_size numbers twice: smaller heads, less per token",
            ),
        ),
        wrong=_options(
            (
                "fewer sequences in the batch that is generated at once",
                "a smaller batch caches fewer tokens, but each costs as much",
            ),
            (
                "a context window cut shorter for each sequence being generated",
                "a shorter window caches fewer tokens, but each costs as much",
            ),
            (
                "more query heads sharing the same number of K/V heads",
                "only K/V heads are cached: query heads add nothing to it, and more of them save nothing",
            ),
            (
                "float32 in place of bfloat16 for the numbers that are cached",
                "float32 takes 4 bytes a number, twice bfloat16's: the cache grows",
            ),
            (
                "a shorter prompt before the generation of new tokens starts",
                "a shorter prompt caches fewer tokens, but each costs as much",
            ),
        ),
    ),
]
