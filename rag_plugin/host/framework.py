"""What BBF 1.5 and BAF 4.5 do the same way under different names: their modules have the same layout under
another package (``besser.bot`` / ``baf``), sessions point to their owner by another attribute (``_bot`` /
``_agent``), the RAG reply and the monitoring DB's owner column are named after the owner. :class:`FrameworkHost`
implements those operations once, from a table of those names; :mod:`rag_plugin.host.bbf` and
:mod:`rag_plugin.host.baf` give the names and what differs beyond them. Each framework is imported on first use."""
from __future__ import annotations

import importlib
from datetime import datetime
from typing import Any, Optional

from rag_plugin.host.base import Host, loaded_class


class FrameworkHost(Host):
    """A host that is one of the BESSER frameworks (see :class:`~rag_plugin.host.Host`).

    Attributes:
        package (str): the framework's package (``besser.bot`` or ``baf``)
        owner_module (str): the module of its bot/agent class, below ``package``
        owner_class (str): that class's name
        owner_attribute (str): the session's attribute holding its owner
        reply_rag_member (str): the ``PayloadAction`` member of a RAG reply
        owner_column (str): the monitoring DB's column naming the owner
    """

    package = ''
    owner_module = ''
    owner_class = ''
    owner_attribute = ''
    reply_rag_member = ''
    owner_column = ''

    def _module(self, name: str) -> Any:
        return importlib.import_module(f'{self.package}.{name}')

    def owns(self, owner: Any) -> bool:
        owner_class = loaded_class(f'{self.package}.{self.owner_module}', self.owner_class)
        return owner_class is not None and isinstance(owner, owner_class)

    def owns_session(self, session: Any) -> bool:
        session_class = loaded_class(f'{self.package}.core.session', 'Session')
        return session_class is not None and isinstance(session, session_class)

    def owner_of(self, session: Any) -> Any:
        return getattr(session, self.owner_attribute)

    def openai_api_key(self, owner: Any) -> Any:
        return owner.get_property(self._module('nlp').OPENAI_API_KEY)

    def message(self, kind: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        module = self._module('core.message')
        return module.Message(module.MessageType[kind], content, is_user, timestamp)

    def message_from_row(self, type_value: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        module = self._module('core.message')
        return module.Message(module.get_message_type(type_value), content, is_user, timestamp)

    def monitoring_db(self, session: Any) -> Any:
        owner = getattr(session, self.owner_attribute, None)
        if owner is None or not hasattr(owner, 'get_property'):
            return None
        db = getattr(owner, '_monitoring_db', None)
        if owner.get_property(self._module('db').DB_MONITORING) and db is not None and getattr(db, 'connected', False):
            return db
        return None

    def chat_tables(self) -> tuple[str, str, str]:
        module = self._module('db.monitoring_db')
        return module.TABLE_CHAT, module.TABLE_SESSION, self.owner_column

    def payload(self, action: str, message: Any) -> Any:
        module = self._module('platforms.payload')
        payload = module.Payload(action=getattr(module.PayloadAction, self.reply_rag_member), message=message)
        payload.action = action
        return payload

    def platform_mismatch(self, platform: Any, session: Any) -> Exception:
        return self._module('exceptions.exceptions').PlatformMismatchError(platform, session)

    def telegram_platform_class(self) -> Optional[type]:
        return loaded_class(f'{self.package}.platforms.telegram.telegram_platform', 'TelegramPlatform')

    def websocket_platform_class(self) -> type:
        return self._module('platforms.websocket.websocket_platform').WebSocketPlatform

    def websocket_properties(self) -> Any:
        return self._module('platforms.websocket')


__all__ = ['FrameworkHost']
