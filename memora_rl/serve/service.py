"""`MemoryService`: the served stores, the policy, the builder and the judge, shared by HTTP, the web page and MCP."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio.from_thread

from memora_rl.builders.base import Builder
from memora_rl.embedding import Embedder
from memora_rl.env.config import EnvConfig
from memora_rl.env.deps import FrontierRanker
from memora_rl.memory.records import Episode
from memora_rl.policy.base import Policy
from memora_rl.serve.checks import warn_if_not_the_export, warn_if_policy_context_short
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.graphs import GraphRegistry
from memora_rl.serve.ingest import ingest_batch
from memora_rl.serve.limits import Deadline, check_ingest, check_question
from memora_rl.serve.live_judge import LiveJudge
from memora_rl.serve.retrieve import ActFn, env_config_for, retrieve
from memora_rl.serve.schemas import IngestRequest, IngestResponse, RetrieveRequest, RetrieveResponse

logger = logging.getLogger(__name__)


def make_policy(config: ServeConfig, env: EnvConfig | None = None) -> Policy:
    """The served policy: a graph baseline, or the exported model behind an OpenAI-compatible endpoint.

    `env`: the served walks' settings, whose action limits a constrained LLM policy's schema follows
    (None: the default env's).
    """
    if config.policy == "llm":
        from memora_rl.core.action_schema import ActionLimits
        from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy

        llm = LLMPolicyConfig(backend="server", base_url=config.llm_base_url, model=config.llm_model or "",
                              name="llm", constrained=config.constrained)  # fmt: skip
        return make_llm_policy(llm, ActionLimits.from_env_config(env or EnvConfig()))
    from memora_rl.policy.baselines import make_baseline

    return make_baseline(config.policy)


def served_env(config: ServeConfig) -> EnvConfig:
    """Env settings of the served walks: the export's training env (its spec and overrides), else the defaults."""
    if config.export is None:
        return EnvConfig()
    from memora_rl.env.registry import resolve_env_spec
    from memora_rl.policy.export_folder import load_export

    manifest = load_export(config.export).manifest
    if manifest.env is None:
        logger.warning("The export %s names no training env; walks use the default env settings.", config.export)
        return EnvConfig()
    return resolve_env_spec(manifest.env, manifest.env_overrides).env


def served_ranker(config: ServeConfig, env: EnvConfig) -> FrontierRanker | None:
    """The learned frontier ranker of an export trained with `env.frontier_ranker: learned`, else None.

    It is the training env's own (fit on its training split, cached), so served walks show the numbers the
    policy learned to read; a served graph is a conversation it never saw, scored by the fit on all of them.
    """
    if env.frontier_ranker != "learned" or config.export is None:
        return None
    from memora_rl.env.registry import make_env
    from memora_rl.policy.export_folder import load_export

    manifest = load_export(config.export).manifest
    training_env, _ = make_env(str(manifest.env), split="train", overrides=manifest.env_overrides)
    with training_env:
        return training_env.ranker


def make_ingest_builder(config: ServeConfig, embedder: Embedder | None) -> Builder:
    """The ingest builder; the extractive one shares the service's embedder (so its cache serves the store)."""
    if config.builder == "extractive":
        from memora_rl.builders.extractive import ExtractiveBuilder, ExtractiveConfig
        from memora_rl.config import load_config

        return ExtractiveBuilder(load_config(ExtractiveConfig, config.builder_config), embedder=embedder)
    from memora_rl.builders.registry import BuilderRequest, make_builder

    request = BuilderRequest(config_path=config.builder_config, llm_base_url=config.builder_llm_base_url,
                             llm_model=config.builder_llm_model)  # fmt: skip
    return make_builder(config.builder, request)


class MemoryService:
    """Everything one serve-memory process holds; thread-safe for concurrent requests.

    Args:
        config: what to serve.
        embedder: the text embedder shared by stores, builder and search (default: the process-wide
            all-MiniLM-L6-v2, loaded on first use, so the parent of worker processes never loads it).
        policy: the retrieval policy (default: `make_policy(config, <the served env>)`).
    """

    def __init__(self, config: ServeConfig, embedder: Embedder | None = None, policy: Policy | None = None) -> None:
        self.config = config
        self.env = served_env(config)
        self.ranker = served_ranker(config, self.env)
        self.graphs = GraphRegistry(config.stores, embedder, config.read_connections)
        self.policy = policy or make_policy(config, self.env)
        if not self.policy.reads_frontier:
            self.env = self.env.model_copy(update={"frontier_limit": 0})
        if policy is None and config.policy == "llm":
            warn_if_policy_context_short(config, self.env)
            warn_if_not_the_export(config)
        self.builder = make_ingest_builder(config, embedder)
        self.judge = LiveJudge(self.env.judge)

    @property
    def embedder(self) -> Embedder:
        """The stores' embedder: the one handed in, else the process-wide one, loaded on first use."""
        return self.graphs.handles[0].reader.embedder

    def warm_up(self) -> None:
        """Load the embedder now, so that the first request does not wait for it."""
        self.embedder.encode_one("warm up")

    def episodes_of(self, graph_id: str, episode_ids: Sequence[str]) -> list[Episode]:
        """Stored episodes by id, in order (ids never stored are left out)."""
        return self.graphs.find(graph_id).reader.get_episodes(graph_id, episode_ids)

    def env_config(self, request: RetrieveRequest) -> EnvConfig:
        """The env settings of one request, once its question length and budget are within the server's limits.

        Raises:
            LimitError: the question is over `max_question_chars` (422).
            ConfigError: the budget is over `max_budget` (422).
        """
        check_question(request.question, self.config)
        return env_config_for(request, self.env, self.config.budget, self.config.max_budget, self.config.top_k)

    def deadline(self) -> Deadline:
        """A deadline for one request, `request_timeout_s` from now (start it when the request arrives)."""
        return Deadline.start(self.config.request_timeout_s)

    def retrieve_sync(self, request: RetrieveRequest, act: ActFn, deadline: Deadline | None = None) -> RetrieveResponse:
        """Walk the request's graph with `act` as the policy (blocking; call from a worker thread).

        Raises:
            RequestTimeoutError: the walk was not done by `deadline` (default: `request_timeout_s` from now).
        """
        handle = self.graphs.find(request.graph)
        env_config = self.env_config(request)
        deadline = deadline or self.deadline()
        return retrieve(
            handle.reader, request, env_config, act, self.policy.name, self.judge, deadline, ranker=self.ranker
        )

    def act_via_loop(self) -> ActFn:
        """An `ActFn` for worker threads started by anyio: runs `policy.act` on the event loop that started them."""

        def act(messages: list, info: dict) -> str:
            return anyio.from_thread.run(self.policy.act, messages, info)

        return act

    def ingest_sync(self, request: IngestRequest, deadline: Deadline | None = None) -> IngestResponse:
        """Add one batch of turns (blocking; one transaction).

        Raises:
            LimitError: the batch is over `max_ingest_turns` or `max_ingest_chars` (413), or it was not written
                by `deadline` (503; default: `request_timeout_s` from now). Either way nothing is written.
        """
        check_ingest(request, self.config)
        handle = self.graphs.find_or_first(request.graph)
        return ingest_batch(handle, self.builder, request, deadline or self.deadline())

    def close(self) -> None:
        """Close the stores."""
        self.graphs.close()
